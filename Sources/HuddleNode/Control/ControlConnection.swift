import NIOCore

/// One client connection on the control socket: the node queues reply and event lines on its
/// outbox, and they are written in order on the connection's event loop, one batch in flight at a
/// time. No task has to be scheduled for a line to leave (the node's actor hands the batch straight
/// to the event loop), and what the client has not yet taken stays in the outbox, where the event
/// log sees it as the subscriber's backlog.
final class ControlConnection: Sendable {
    let outbox = Outbox<[UInt8]>()
    private let channel: any Channel

    init(channel: any Channel) { self.channel = channel }

    /// Writes batches as they are queued until the outbox is closed and drained; `done` then
    /// succeeds (or fails with the first failed write, after which the outbox is closed).
    func writeQueued(done: EventLoopPromise<Void>) {
        outbox.whenReady { [self] lines in
            // Always through the event loop's queue: a write that completes at once does not
            // recurse into the next one.
            channel.eventLoop.execute {
                guard let lines else { return done.succeed() }
                var buffer = self.channel.allocator.buffer(capacity: lines.reduce(0) { $0 + $1.count })
                for line in lines { buffer.writeBytes(line) }
                self.channel.writeAndFlush(buffer).whenComplete { result in
                    switch result {
                    case .success: self.writeQueued(done: done)
                    case let .failure(error):
                        self.outbox.close()
                        done.fail(error)
                    }
                }
            }
        }
    }
}
