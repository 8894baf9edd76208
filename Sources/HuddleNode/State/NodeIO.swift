import Dispatch
import Foundation

/// The node's file writes — the data directory's commits (`NodeStateStore`), `leaving`, the key
/// file's rewrite on an epoch move, the event spool's segment writes (`EventSpool`) — run here, one
/// at a time in the order they were handed over, on a serial dispatch queue: never on the node's
/// actor, never on a thread of Swift's cooperative pool (an fsync there would stall every task).
///
/// Guarantees: work runs in submission order, each piece after the previous one returned (so a key
/// file handed over after a commit is written after that commit is durable); `isCurrent` is true
/// only on this queue — the writing functions check it (`precondition`), so a write reached from
/// the actor stops the process in every build instead of blocking the actor unnoticed.
///
/// `HUDDLE_TEST_COMMIT_DELAY_MS` is a **test-only** knob, like `WallClock`'s: each commit of the
/// state sleeps that long on this queue first (a slow disk), so a test can show that the node
/// answers its control socket meanwhile and that nothing held for the commit leaves before it.
/// `HUDDLE_TEST_SPOOL_READ_DELAY_MS`, the same for each read of the event spool's files (a `since`
/// replay, a commit's events no longer in memory). Neither is an option of `huddle run`; nothing
/// else reads them.
final class NodeIO: Sendable {
    static let delayVariable = "HUDDLE_TEST_COMMIT_DELAY_MS"
    static let readDelayVariable = "HUDDLE_TEST_SPOOL_READ_DELAY_MS"
    /// Longest test delay taken (a minute); a larger or unreadable one is ignored.
    static let maximumDelayMs = 60_000

    private static let marker = DispatchSpecificKey<UInt8>()
    private let queue: DispatchQueue
    /// The test-only delay before each commit (nil but in tests).
    let commitDelay: Duration?
    /// The test-only delay before each read of the event spool's files (nil but in tests).
    let readDelay: Duration?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        queue = DispatchQueue(label: "huddle.node-io", qos: .userInitiated)
        queue.setSpecific(key: Self.marker, value: 1)
        commitDelay = Self.delay(environment[Self.delayVariable])
        readDelay = Self.delay(environment[Self.readDelayVariable])
    }

    /// A test delay's value: milliseconds in 1...`maximumDelayMs`, else none.
    static func delay(_ text: String?) -> Duration? {
        guard let text, let ms = Int(text), ms > 0, ms <= maximumDelayMs else { return nil }
        return .milliseconds(ms)
    }

    /// Whether the calling code runs on a node's I/O queue.
    static var isCurrent: Bool { DispatchQueue.getSpecific(key: marker) != nil }

    /// Stops the process when a file write runs anywhere but on the I/O queue (on the actor).
    static func checkCurrent(_ what: StaticString, file: StaticString = #fileID, line: UInt = #line) {
        precondition(isCurrent, "\(what) ran off the node's I/O queue (on the node actor?)", file: file, line: line)
    }

    /// Runs `work` after everything handed over before it, and returns its result.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Runs `work` after everything handed over before it; does not wait for it.
    func submit(_ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }

    /// Runs `work` after everything handed over before it and waits, blocking the calling thread:
    /// only for the process's exit (`NodeRunner`) and tests, never from the actor.
    func blockingRun<T>(_ work: () throws -> T) rethrows -> T {
        precondition(!Self.isCurrent, "blockingRun on the I/O queue itself")
        return try queue.sync(execute: work)
    }

    /// Sleeps for the test-only commit delay, when one is set (on this queue).
    func testDelay() { Self.sleep(commitDelay) }

    /// Sleeps for the test-only spool read delay, when one is set (on this queue).
    func testReadDelay() { Self.sleep(readDelay) }

    private static func sleep(_ delay: Duration?) {
        guard let delay else { return }
        Thread.sleep(forTimeInterval: delay / .seconds(1))
    }
}
