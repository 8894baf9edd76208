import NIOCore

/// One client connection on the control socket: the node queues reply and event lines on its
/// outbox, and `ChannelPump` writes them in order on the connection's event loop; what the client
/// has not yet taken stays in the outbox, where the event log sees it as the subscriber's backlog.
final class ControlConnection: Sendable {
    let outbox = Outbox<[UInt8]>()

    /// Starts writing queued lines to `channel`; `done` completes once the outbox is closed and
    /// everything queued is written (or a write failed).
    func startWriting(to channel: any Channel, done: EventLoopPromise<Void>) {
        ChannelPump.run(outbox, to: channel, done: done) { lines, allocator in
            var buffer = allocator.buffer(capacity: lines.reduce(0) { $0 + $1.count })
            for line in lines { buffer.writeBytes(line) }
            return buffer
        }
    }
}
