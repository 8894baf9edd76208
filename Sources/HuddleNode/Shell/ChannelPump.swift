import NIOCore

/// Writes what the node queues on an outbox to a channel, on the channel's event loop.
///
/// Each batch the outbox hands over is encoded into one buffer and flushed; the next batch is taken
/// once that write completes, so one batch is in flight at a time and everything else waits in the
/// outbox, where it is counted. No task is scheduled for a write: a batch goes from the thread that
/// queued it straight to the event loop. When the outbox is closed and drained the channel's
/// output is closed (the peer reads to the end) and `done` succeeds; a failed encode or write
/// closes the outbox and the channel and fails `done`.
enum ChannelPump {
    static func run<Element: Sendable>(
        _ outbox: Outbox<Element>, to channel: any Channel, done: EventLoopPromise<Void>,
        encode: @escaping @Sendable ([Element], ByteBufferAllocator) throws -> ByteBuffer
    ) {
        outbox.whenReady { batch in
            // Always through the event loop's queue, also when called on it: a write that
            // completes at once does not recurse into the next one.
            channel.eventLoop.execute {
                guard let batch else {
                    channel.close(mode: .output, promise: nil)
                    return done.succeed()
                }
                let buffer: ByteBuffer
                do {
                    buffer = try encode(batch, channel.allocator)
                } catch {
                    return fail(outbox, channel, done, error)
                }
                channel.writeAndFlush(buffer).whenComplete { result in
                    switch result {
                    case .success: run(outbox, to: channel, done: done, encode: encode)
                    case let .failure(error): fail(outbox, channel, done, error)
                    }
                }
            }
        }
    }

    /// Waits for `done` (the writer draining what was queued once its outbox is closed), closing
    /// `channel` if that takes longer than `limit`: a peer or client that stops reading never
    /// holds a task (and the node's exit) forever. The close fails the pending write, so `done`
    /// fails and this throws.
    static func awaitDrain(_ done: EventLoopPromise<Void>, closing channel: any Channel, within limit: TimeAmount = drainLimit) async throws {
        let cutoff = channel.eventLoop.scheduleTask(in: limit) { channel.close(promise: nil) }
        defer { cutoff.cancel() }
        try await done.futureResult.get()
    }

    static let drainLimit: TimeAmount = .seconds(10)

    private static func fail<Element>(_ outbox: Outbox<Element>, _ channel: any Channel, _ done: EventLoopPromise<Void>, _ error: any Error) {
        outbox.close()
        channel.close(promise: nil)
        done.fail(error)
    }
}
