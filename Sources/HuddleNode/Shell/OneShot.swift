import Synchronization

/// Resumes a continuation exactly once, whichever of several paths gets there first.
final class OneShot<Value: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, Error>?>

    init(_ continuation: CheckedContinuation<Value, Error>) { self.continuation = Mutex(continuation) }

    func resume(_ result: Result<Value, Error>) {
        let c = continuation.withLock { c -> CheckedContinuation<Value, Error>? in defer { c = nil }; return c }
        c?.resume(with: result)
    }
}
