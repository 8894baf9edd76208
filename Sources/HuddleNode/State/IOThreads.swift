import Foundation
import Synchronization

/// Which threads may touch the node's files: the I/O queues (`NodeIO`) and the file work pools
/// (`ChunkIO`, `BulkWork`, and the helper threads of an import). Every file call the node's
/// actor could reach — chunk reads and writes, the store's listing and sizes, the event spool's
/// reads, an export, the key file's `stat` — calls `check` first: a call from any other thread
/// (the node's actor, or any task of Swift's cooperative pool) is counted in `offThreadCalls`,
/// and the first one's name is kept (`firstOffThread`).
///
/// Guarantees: in every build (the suite runs release builds), `offThreadCalls` is 0 as long as
/// no checked file call ran on the node's actor; `stats` reports it as `blocking_file_io`, so a
/// process test can see it. Counting costs one thread-local read per file call.
enum IOThreads {
    /// The thread-local mark of a file work thread (set for the duration of `run`).
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-local key for the I/O threads' mark")
        return key
    }()
    private static let offThread = Atomic<Int>(0)
    private static let first = Mutex<String?>(nil)

    /// Whether the calling thread is one the node's file work runs on.
    static var isCurrent: Bool { pthread_getspecific(key) != nil || NodeIO.isCurrent }

    /// Runs `body` with the calling thread marked as a file work thread (restored after).
    static func run<T>(_ body: () throws -> T) rethrows -> T {
        let was = pthread_getspecific(key)
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
        defer { pthread_setspecific(key, was) }
        return try body()
    }

    /// Counts a file call (`what`) made off the I/O threads.
    static func check(_ what: StaticString) {
        guard !isCurrent else { return }
        if offThread.add(1, ordering: .relaxed).oldValue == 0 {
            first.withLock { $0 = $0 ?? "\(what)" }
        }
    }

    /// File calls made off the I/O threads since the process started (0: none on the actor).
    static var offThreadCalls: Int { offThread.load(ordering: .relaxed) }

    /// The first such call's name, if any.
    static var firstOffThread: String? { first.withLock { $0 } }
}
