import Foundation
import NIOPosix

/// File work off the node's actor and off Swift's cooperative pool, on NIO thread pools.
///
/// - `BulkWork`: heavy attachment file work (importing a file, exporting one with `attach.get`,
///   checking a stored copy) at a lower scheduling priority (nice 10), so on a busy machine it
///   yields the CPU to the node's other threads.
/// - `ChunkIO`: one chunk read or written for a transfer (serving a peer, storing what arrived),
///   at normal priority, since transfers wait on it.
///
/// (Received chunks are hashed by the link's chunk tasks on the cooperative pool,
/// `LinkSession.storeChunk`: moving hashing to a thread pool measured ~10 % slower transfers at
/// N = 8 for no clear gain in message latency.) Guarantees: file work never holds a
/// cooperative thread (one per core) or the node's actor.
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
            return try body()
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
    private static let pool = FileWorkPool(niceness: 0)
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T { try await pool.run(body) }
}
