import Foundation
import NIOPosix

/// Runs heavy attachment file work (importing a file, exporting one with `attach.get`) on a small
/// pool of threads at a lower scheduling priority (nice 10), off Swift's cooperative pool.
/// (Hashing received chunks stays on the link's task: moving it here measured ~10 % slower
/// transfers at N = 8 for no clear gain in message latency.)
///
/// Guarantees: bulk file work never holds a cooperative thread (one per core), and on a busy
/// machine it yields the CPU to the node's other threads. Each job lowers its own thread's priority
/// (the pool creates threads lazily).
enum BulkWork {
    private static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: max(1, ProcessInfo.processInfo.activeProcessorCount))
        pool.start()
        return pool
    }()

    static let niceness: Int32 = 10

    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive {
            lowerThisThread()
            return try body()
        }
    }

    /// On Linux the nice value belongs to each thread, and `who` 0 names the calling thread.
    private static func lowerThisThread() {
        #if os(Linux)
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness)
        #endif
    }
}
