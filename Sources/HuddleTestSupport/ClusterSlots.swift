import Foundation

/// How many tests run real nodes at once in this test process (`$HUDDLE_TEST_CLUSTERS`, default 8).
///
/// Swift Testing starts every test at once; with every process test's nodes up together (88 nodes
/// on 2 cores were seen) the idle work of the nodes alone filled the machine, every test ran 2–3
/// times slower, and timing-sensitive checks met load instead of the behaviour they check. A test
/// takes a slot before its first node starts and gives it back at teardown; the rest wait their
/// turn (FIFO). Guarantee: at most `limit` slots are held at once; a slot given back goes to the
/// longest waiter.
public actor ClusterSlots {
    public static let shared = ClusterSlots(limit: ProcessInfo.processInfo.environment["HUDDLE_TEST_CLUSTERS"].flatMap { Int($0) }.map { max(1, $0) } ?? 8)

    private var free: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    public init(limit: Int) { free = limit }

    /// Waits for a slot.
    public func acquire() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    /// Gives a slot back (to the longest waiter, if any).
    public func release() {
        if waiters.isEmpty {
            free += 1
        } else {
            waiters.removeFirst().resume()
        }
    }
}
