import Foundation

/// Runs a long simulation on a thread of its own and awaits its result. A simulation is minutes of
/// synchronous work; on Swift concurrency's cooperative pool (one thread per core: two here) it
/// would hold a thread the whole time, and the real-process tests running beside it would starve
/// past their deadlines.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: work()) }
        thread.stackSize = 16 << 20
        thread.start()
    }
}
