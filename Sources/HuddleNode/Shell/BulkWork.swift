import Foundation
import NIOPosix

/// File work off the node's actor and off Swift's cooperative pool, on NIO thread pools.
///
/// - `BulkWork`: heavy attachment file work (importing a file, exporting one with `attach.get`,
///   checking a stored copy) at a lower scheduling priority (nice 10), so on a busy machine it
///   yields the CPU to the node's other threads.
/// - `ChunkIO`: a transfer's chunk work: one chunk read (serving a peer), or a received chunk
///   hashed and then written (`LinkSession.storeChunk`), also at nice 10. Messages are carried by
///   the NIO event loops and the cooperative pool (link reader, the node's actor, control
///   connections); with chunk work at the same priority on those threads, at N = 4 on 2 cores each
///   of a message's hops waited ~1 ms for a core while chunks flowed (run-queue wait per time
///   slice, /proc/PID/task/TID/schedstat: event loops 0.82 ms, cooperative pool 1.03 ms); with
///   chunk work lowered here, 0.22 and 0.21 ms. The CPU is not idled by it: lowered work runs
///   whenever the message threads leave a core free.
///
/// Guarantees: file and chunk work never holds a cooperative thread (one per core) or the node's
/// actor.
struct FileWorkPool: Sendable {
    private let pool: NIOThreadPool
    private let niceness: Int32

    init(niceness: Int32) {
        pool = NIOThreadPool(numberOfThreads: max(1, ProcessInfo.processInfo.activeProcessorCount))
        pool.start()
        self.niceness = niceness
    }

    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive { [niceness] in
            if niceness != 0 { Self.lowerThisThread(to: niceness) }
            return try IOThreads.run(body)
        }
    }

    /// On Linux the nice value belongs to each thread, and `who` 0 names the calling thread.
    private static func lowerThisThread(to niceness: Int32) {
        #if os(Linux)
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness)
        #endif
    }
}

enum BulkWork {
    static let niceness: Int32 = 10
    private static let pool = FileWorkPool(niceness: niceness)
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T { try await pool.run(body) }
}

enum ChunkIO {
    static let niceness: Int32 = 10
    private static let pool = FileWorkPool(niceness: niceness)
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T { try await pool.run(body) }
}
