import Synchronization

/// A queue between the node (which pushes without waiting) and one writer (a task awaiting
/// `takeAll`, or a callback given to `whenReady`) that takes what is queued at once, so its writes
/// are batched into one flush.
///
/// Two lanes: ordinary items, and bulk items (attachment chunks). A batch holds ordinary items up
/// to `batchBytes` and then bulk items up to `bulkBatchBytes` (at least one of each lane that has
/// any), so a small message queued behind megabytes of chunks waits for one chunk's write, not
/// for all of them, and the buffer a writer encodes one batch into is bounded by the two limits
/// (plus one item of each lane) however much is queued.
/// Guarantees: within each lane items come out in push order; after `close()` pushes are refused
/// and the waiting writer is woken with nil once the queue is drained; `waitingSince` says since
/// when queued items have waited without the writer taking any (a writer stuck on a peer that
/// does not read) — or, with `progressBelow`, without a take that left fewer bytes than that
/// queued (a peer that reads a little now and then while a backlog stays).
final class Outbox<Element: Sendable>: Sendable {
    /// One lane's items in push order, each with its bytes and (in a timed outbox's ordinary
    /// lane) when it was pushed, taken from `head`.
    private struct Lane {
        var items: [(Element, Int, ContinuousClock.Instant?)] = []
        var head = 0

        var isEmpty: Bool { head == items.count }

        mutating func push(_ item: Element, bytes: Int, at time: ContinuousClock.Instant?) { items.append((item, bytes, time)) }

        /// Moves items to `out` while they fit `limit` bytes (at least one); returns their bytes
        /// and when the first of them was pushed (nil: none taken, or not timed).
        mutating func take(upTo limit: Int, into out: inout [Element]) -> (bytes: Int, firstPushed: ContinuousClock.Instant?) {
            let firstPushed = head < items.count ? items[head].2 : nil
            var taken = 0
            while head < items.count, taken == 0 || taken + items[head].1 <= limit {
                out.append(items[head].0)
                taken += items[head].1
                head += 1
            }
            if head == items.count {
                items = []
                head = 0
            } else if head >= 64 {
                items.removeFirst(head)
                head = 0
            }
            return (taken, firstPushed)
        }
    }

    private struct State {
        var items = Lane()
        var bulk = Lane()
        /// Bytes of everything queued, both lanes.
        var bytes = 0
        var waiter: Waiter?
        var closed = false
        /// When the items now queued started waiting: the first push into an empty outbox, or
        /// the writer's last take that left some behind (and fewer than `progressBelow` bytes).
        var waitingSince: ContinuousClock.Instant?
        /// How long the oldest ordinary item of the last batch taken had waited (`takeItemsWait`;
        /// only in a timed outbox).
        var itemsWait: Duration?

        var isEmpty: Bool { items.isEmpty && bulk.isEmpty }

        /// The waiting writer and what it should get now, when there is a writer and something queued.
        mutating func handOff(_ limits: Limits) -> (Waiter, [Element])? {
            guard !isEmpty, let waiter else { return nil }
            self.waiter = nil
            return (waiter, takeBatch(limits))
        }

        mutating func takeBatch(_ limits: Limits) -> [Element] {
            var out: [Element] = []
            let ordinary = items.take(upTo: limits.batch, into: &out)
            bytes -= ordinary.bytes
            itemsWait = ordinary.firstPushed.map { .now - $0 }
            bytes -= bulk.take(upTo: limits.bulk, into: &out).bytes
            waitingSince = isEmpty ? nil : bytes < limits.progressBelow ? .now : waitingSince ?? .now
            return out
        }
    }
    /// Most bytes of ordinary and of bulk items in one batch (each at least one item).
    private struct Limits { var batch: Int; var bulk: Int; var progressBelow: Int; var timed: Bool }
    /// Takes the next batch, or nil once the outbox is closed and drained.
    typealias Waiter = @Sendable ([Element]?) -> Void
    private let state = Mutex(State())
    private let limits: Limits

    /// `batchBytes` bounds the ordinary items of one batch (unbounded by default: a control
    /// connection's lines are bounded where they are queued, by the event log's window).
    /// `progressBelow`: a take counts as progress for `waitingSince` only when it leaves fewer
    /// bytes than this queued (any take, by default). `timed`: each ordinary item's push is timed
    /// for `takeItemsWait` (with `--metrics`; a clock read per push, none otherwise).
    init(batchBytes: Int = .max, bulkBatchBytes: Int = 320 * 1024, progressBelow: Int = .max, timed: Bool = false) {
        limits = Limits(batch: batchBytes, bulk: bulkBatchBytes, progressBelow: progressBelow, timed: timed)
    }

    /// Bytes queued (both lanes) and not yet taken by the writer.
    var queuedBytes: Int { state.withLock { $0.bytes } }

    /// Since when the items queued now have waited with no take by the writer; nil when empty.
    var waitingSince: ContinuousClock.Instant? { state.withLock { $0.waitingSince } }

    /// How long the oldest ordinary item of the batch the writer last took had waited in the
    /// queue, once (nil after that, when that batch held none, or when the outbox is not timed):
    /// `MessageHop.linkQueue` and `.eventQueue`, read by the writer after it took the batch.
    func takeItemsWait() -> Duration? {
        state.withLock { s in
            defer { s.itemsWait = nil }
            return s.itemsWait
        }
    }

    /// Queues `item` (in the bulk lane when `bulk`); false when the outbox is closed. With `wake`
    /// false a waiting writer is not woken: the caller queues more and calls `wake()` once, so a
    /// burst costs the writer one wake-up and one write instead of one per item.
    @discardableResult
    func push(_ item: Element, bytes: Int, bulk: Bool = false, wake: Bool = true) -> Bool {
        let limits = limits
        let woken: (Waiter, [Element])? = state.withLock { s in
            guard !s.closed else { return nil }
            if s.isEmpty { s.waitingSince = .now }
            if bulk { s.bulk.push(item, bytes: bytes, at: nil) } else { s.items.push(item, bytes: bytes, at: limits.timed ? .now : nil) }
            s.bytes += bytes
            return wake ? s.handOff(limits) : nil
        }
        if let (waiter, items) = woken { waiter(items); return true }
        return state.withLock { !$0.closed }
    }

    /// Hands a waiting writer the next batch of what is queued (after pushes made with `wake: false`).
    func wake() {
        let limits = limits
        let woken = state.withLock { $0.handOff(limits) }
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
        let limits = limits
        let ready: [Element]?? = state.withLock { s in
            if !s.isEmpty { return .some(s.takeBatch(limits)) }
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
            s.items = Lane()
            s.bulk = Lane()
            s.bytes = 0
            s.waitingSince = nil
            defer { s.waiter = nil }
            return s.waiter
        }
        woken?(nil)
    }

    /// Refuses further pushes; a waiting writer gets what is still queued, then nil.
    func close() {
        let limits = limits
        let woken: (Waiter, [Element]?)? = state.withLock { s in
            s.closed = true
            guard let waiter = s.waiter else { return nil }
            s.waiter = nil
            return (waiter, s.isEmpty ? nil : s.takeBatch(limits))
        }
        if let (waiter, items) = woken { waiter(items) }
    }
}
