/// The storage behind `GroupSession`'s `$state`, `$activeParticipants` and `$activity`: a value read
/// from the session's hub and its changes, spelled as Combine's `@Published` is
/// (`session.$state.values`), over an `AsyncStream` instead of a publisher.
///
/// Guarantees: `wrappedValue` is the session's current value; each `values` is a new sequence
/// starting with the current value (once joined), then each change, ending when the session is
/// invalidated; setting (where the session allows it) never blocks.
@propertyWrapper
public struct SessionPublished<Value: Sendable>: Sendable {
    let read: @Sendable () -> Value
    let write: @Sendable (Value) -> Void
    let updates: @Sendable () -> AsyncStream<Value>

    init(read: @escaping @Sendable () -> Value, write: @escaping @Sendable (Value) -> Void = { _ in },
         updates: @escaping @Sendable () -> AsyncStream<Value>) {
        self.read = read
        self.write = write
        self.updates = updates
    }

    /// The current value.
    public var wrappedValue: Value {
        get { read() }
        nonmutating set { write(newValue) }
    }

    /// `$property`: what Combine's `Published.Publisher` offers, as an async sequence.
    public var projectedValue: Publisher { Publisher(updates: updates) }

    /// The changes of one session value.
    public struct Publisher: Sendable {
        let updates: @Sendable () -> AsyncStream<Value>
        /// The value now (once joined), then each change, as Combine's `values`.
        public var values: AsyncStream<Value> { updates() }
    }
}

extension AsyncStream where Element: Sendable {
    /// `base` with `transform` applied to each element; cancelled with its reader.
    static func mapping<Base: Sendable>(_ base: AsyncStream<Base>, _ transform: @escaping @Sendable (Base) -> Element) -> AsyncStream<Element> {
        AsyncStream { continuation in
            let task = Task {
                for await value in base { continuation.yield(transform(value)) }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
