/// The open streams of one kind of update: each `stream(first:)` is a new `AsyncStream` that gets
/// every later `yield`, in order, until `finish()`.
///
/// Guarantees: a stream never blocks the yielder (unbounded buffer); a stream its reader dropped is
/// forgotten at the next `yield`.
struct Sinks<Element: Sendable>: Sendable {
    private var continuations: [Int: AsyncStream<Element>.Continuation] = [:]
    private var next = 0
    private(set) var finished = false

    /// A new stream, starting with `first` when given.
    mutating func stream(first: Element?) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        if let first { continuation.yield(first) }
        if finished {
            continuation.finish()
        } else {
            continuations[next] = continuation
            next += 1
        }
        return stream
    }

    mutating func yield(_ element: Element) {
        for (key, continuation) in continuations {
            if case .terminated = continuation.yield(element) { continuations[key] = nil }
        }
    }

    mutating func finish() {
        finished = true
        for continuation in continuations.values { continuation.finish() }
        continuations = [:]
    }
}
