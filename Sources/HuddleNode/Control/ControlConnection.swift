import HuddleControl
import NIOCore
import Synchronization

/// One client connection on the control socket: the node queues reply and event lines on its
/// outbox, and `ChannelPump` writes them in order on the connection's event loop; what the client
/// has not yet taken stays in the outbox, where the event log sees it as the subscriber's backlog.
/// A subscriber's backlog is queued a window at a time: the event log arms the connection
/// (`armRefill`) and `refill` is called once, from the writer, the next time it takes a batch.
/// After a binary `subscribe` (README, "Binary event frames") everything on it is a frame, replies
/// included (`queueReply`).
final class ControlConnection: Sendable {
    let outbox: Outbox<[UInt8]>
    private let refill = Mutex<(action: (@Sendable (ControlConnection) -> Void)?, armed: Bool)>((nil, false))
    private let framed = Atomic<Bool>(false)

    /// `timed`: the outbox times its lines (`MessageHop.eventQueue`, with `--metrics`).
    init(timed: Bool = false) { outbox = Outbox(timed: timed) }

    /// Whether what the node writes here is frames (since a binary `subscribe`'s reply).
    var isFramed: Bool { framed.load(ordering: .relaxed) }

    /// From now on what the node writes here is frames (`binary`) or JSON lines.
    func setFramed(_ binary: Bool) { framed.store(binary, ordering: .relaxed) }

    /// Queues a reply line (with its `\n`): as it is, or as a `json` frame when the connection is framed.
    func queueReply(_ line: [UInt8], wake: Bool = true) {
        let bytes = isFramed ? EventFrame.wrap(line: line) : line
        outbox.push(bytes, bytes: bytes.count, wake: wake)
    }

    /// What the writer calls when armed (the node feeds the subscriber on this connection).
    func setRefill(_ action: @escaping @Sendable (ControlConnection) -> Void) { refill.withLock { $0.action = action } }

    /// The next take by the writer calls the refill action (once).
    func armRefill() { refill.withLock { $0.armed = true } }

    func disarmRefill() { refill.withLock { $0.armed = false } }

    private func takeRefill() -> (@Sendable (ControlConnection) -> Void)? {
        refill.withLock { state in
            guard state.armed else { return nil }
            state.armed = false
            return state.action
        }
    }

    /// Called by the writer each time it takes a batch: the refill action, once, when armed.
    func writerTook() {
        if let action = takeRefill() { action(self) }
    }

    /// Starts writing queued lines to `channel`; `done` completes once the outbox is closed and
    /// everything queued is written (or a write failed). With `metrics`, each write's oldest line's
    /// wait is `MessageHop.eventQueue`.
    func startWriting(to channel: any Channel, done: EventLoopPromise<Void>, metrics: NodeMetrics? = nil) {
        ChannelPump.run(outbox, to: channel, done: done) { [weak self] lines, allocator in
            if let metrics, let wait = self?.outbox.takeItemsWait() { metrics.record(.eventQueue, wait) }
            var buffer = allocator.buffer(capacity: lines.reduce(0) { $0 + $1.count })
            for line in lines { buffer.writeBytes(line) }
            self?.writerTook()
            return buffer
        }
    }
}
