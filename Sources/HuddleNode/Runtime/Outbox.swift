import Synchronization

/// A queue between the node (which pushes without waiting) and one writer task (which takes
/// everything queued at once, so its writes are batched into one flush).
/// Guarantees: items come out in push order; after `close()` pushes are refused and the waiting
/// writer is woken with nil once the queue is drained.
final class Outbox<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var bytes = 0
        var waiter: CheckedContinuation<[Element]?, Never>?
        var closed = false
    }
    private let state = Mutex(State())

    /// Bytes queued and not yet taken by the writer.
    var queuedBytes: Int { state.withLock { $0.bytes } }

    /// Queues `item`; false when the outbox is closed.
    @discardableResult
    func push(_ item: Element, bytes: Int) -> Bool {
        let wake: (CheckedContinuation<[Element]?, Never>, [Element])? = state.withLock { s in
            guard !s.closed else { return nil }
            if let waiter = s.waiter {
                s.waiter = nil
                return (waiter, [item])
            }
            s.items.append(item)
            s.bytes += bytes
            return nil
        }
        if let (waiter, items) = wake { waiter.resume(returning: items); return true }
        return state.withLock { !$0.closed }
    }

    /// Everything queued, waiting while the queue is empty; nil once closed and drained.
    func takeAll() async -> [Element]? {
        await withTaskCancellationHandler {
            await waitForItems()
        } onCancel: {
            close()
        }
    }

    private func waitForItems() async -> [Element]? {
        await withCheckedContinuation { (c: CheckedContinuation<[Element]?, Never>) in
            let ready: [Element]?? = state.withLock { s in
                if !s.items.isEmpty {
                    defer { s.items = []; s.bytes = 0 }
                    return .some(s.items)
                }
                if s.closed { return .some(nil) }
                s.waiter = c
                return .none
            }
            if let ready { c.resume(returning: ready) }
        }
    }

    func close() {
        let waiter = state.withLock { s -> CheckedContinuation<[Element]?, Never>? in
            s.closed = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }
}
