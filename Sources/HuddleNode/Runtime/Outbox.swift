import Synchronization

/// A queue between the node (which pushes without waiting) and one writer (a task awaiting
/// `takeAll`, or a callback given to `whenReady`) that takes what is queued at once, so its writes
/// are batched into one flush.
///
/// Two lanes: ordinary items, and bulk items (attachment chunks). A batch holds every ordinary
/// item queued and bulk items up to `bulkBatchBytes` (at least one), so a small message queued
/// behind megabytes of chunks waits for one chunk's write, not for all of them.
/// Guarantees: within each lane items come out in push order; after `close()` pushes are refused
/// and the waiting writer is woken with nil once the queue is drained; `waitingSince` says since
/// when queued items have waited without the writer taking any (a writer stuck on a peer that
/// does not read).
final class Outbox<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var bulk: [(Element, Int)] = []
        var bulkHead = 0
        /// Bytes of everything queued, both lanes.
        var bytes = 0
        var itemBytes = 0
        var waiter: Waiter?
        var closed = false
        /// When the items now queued started waiting: the first push into an empty outbox, or
        /// the writer's last take that left some behind.
        var waitingSince: ContinuousClock.Instant?

        var isEmpty: Bool { items.isEmpty && bulkHead == bulk.count }

        /// The waiting writer and what it should get now, when there is a writer and something queued.
        mutating func handOff(bulkLimit: Int) -> (Waiter, [Element])? {
            guard !isEmpty, let waiter else { return nil }
            self.waiter = nil
            return (waiter, takeBatch(bulkLimit: bulkLimit))
        }

        mutating func takeBatch(bulkLimit: Int) -> [Element] {
            var out = items
            items = []
            var taken = 0
            bytes -= itemBytes
            itemBytes = 0
            while bulkHead < bulk.count, taken == 0 || taken + bulk[bulkHead].1 <= bulkLimit {
                out.append(bulk[bulkHead].0)
                taken += bulk[bulkHead].1
                bulkHead += 1
            }
            if bulkHead == bulk.count {
                bulk = []
                bulkHead = 0
            } else if bulkHead >= 64 {
                bulk.removeFirst(bulkHead)
                bulkHead = 0
            }
            bytes -= taken
            waitingSince = isEmpty ? nil : .now
            return out
        }
    }
    /// Takes the next batch, or nil once the outbox is closed and drained.
    typealias Waiter = @Sendable ([Element]?) -> Void
    private let state = Mutex(State())
    private let bulkBatchBytes: Int

    init(bulkBatchBytes: Int = 320 * 1024) {
        self.bulkBatchBytes = bulkBatchBytes
    }

    /// Bytes queued (both lanes) and not yet taken by the writer.
    var queuedBytes: Int { state.withLock { $0.bytes } }

    /// Since when the items queued now have waited with no take by the writer; nil when empty.
    var waitingSince: ContinuousClock.Instant? { state.withLock { $0.waitingSince } }

    /// Queues `item` (in the bulk lane when `bulk`); false when the outbox is closed. With `wake`
    /// false a waiting writer is not woken: the caller queues more and calls `wake()` once, so a
    /// burst costs the writer one wake-up and one write instead of one per item.
    @discardableResult
    func push(_ item: Element, bytes: Int, bulk: Bool = false, wake: Bool = true) -> Bool {
        let limit = bulkBatchBytes
        let woken: (Waiter, [Element])? = state.withLock { s in
            guard !s.closed else { return nil }
            if s.isEmpty { s.waitingSince = .now }
            if bulk { s.bulk.append((item, bytes)) } else { s.items.append(item); s.itemBytes += bytes }
            s.bytes += bytes
            return wake ? s.handOff(bulkLimit: limit) : nil
        }
        if let (waiter, items) = woken { waiter(items); return true }
        return state.withLock { !$0.closed }
    }

    /// Hands a waiting writer everything queued (after pushes made with `wake: false`).
    func wake() {
        let limit = bulkBatchBytes
        let woken = state.withLock { $0.handOff(bulkLimit: limit) }
        if let (waiter, items) = woken { waiter(items) }
    }

    /// The next batch, waiting while the queue is empty; nil once closed and drained.
    func takeAll() async -> [Element]? {
        await withTaskCancellationHandler {
            await waitForItems()
        } onCancel: {
            close()
        }
    }

    private func waitForItems() async -> [Element]? {
        await withCheckedContinuation { (c: CheckedContinuation<[Element]?, Never>) in
            whenReady { c.resume(returning: $0) }
        }
    }

    /// Calls `take` with the next batch: at once when something is queued (nil when closed and
    /// drained), otherwise from the push or wake that queues the next item, on the caller's thread.
    func whenReady(_ take: @escaping Waiter) {
        let limit = bulkBatchBytes
        let ready: [Element]?? = state.withLock { s in
            if !s.isEmpty { return .some(s.takeBatch(bulkLimit: limit)) }
            if s.closed { return .some(nil) }
            s.waiter = take
            return .none
        }
        if let ready { take(ready) }
    }

    /// Refuses further pushes and drops everything queued; a waiting writer gets nil.
    func discard() {
        let woken: Waiter? = state.withLock { s in
            s.closed = true
            s.items = []
            s.bulk = []
            s.bulkHead = 0
            s.bytes = 0
            s.itemBytes = 0
            s.waitingSince = nil
            defer { s.waiter = nil }
            return s.waiter
        }
        woken?(nil)
    }

    /// Refuses further pushes; a waiting writer gets what is still queued, then nil.
    func close() {
        let limit = bulkBatchBytes
        let woken: (Waiter, [Element]?)? = state.withLock { s in
            s.closed = true
            guard let waiter = s.waiter else { return nil }
            s.waiter = nil
            return (waiter, s.isEmpty ? nil : s.takeBatch(bulkLimit: limit))
        }
        if let (waiter, items) = woken { waiter(items) }
    }
}
