import HuddleControl

/// Sends `Codable` messages to the session's participants and receives them by type, as
/// SharePlay's `GroupSessionMessenger`.
///
/// Guarantees: with `.reliable` delivery, every participant that stays in the session receives each
/// message once, in causal order (the node's causal broadcast); with `.unreliable`, at most once
/// (one datagram, ≤ 1 KiB). A messenger never receives its own messages; `messages(of:)` yields
/// only messages sent as that type, and skips those that do not decode as it.
public final class GroupSessionMessenger: Sendable {
    /// How messages travel.
    public enum DeliveryMode: Sendable {
        /// Causal reliable broadcast (or a directed send): exactly once, in causal order.
        case reliable
        /// One datagram, best effort: may be lost, never delivered twice; bodies up to 1 KiB.
        case unreliable
    }

    /// Who a message goes to.
    public enum Participants: Sendable, Equatable {
        /// Every participant of the session.
        case all
        /// Only these participants (a directed send).
        case only(Set<Participant>)
    }

    /// Where a received message came from.
    public struct MessageContext: Sendable {
        /// The participant that sent it.
        public let source: Participant
    }

    /// The messages of one type, with their context, in the order the node delivered them.
    public struct Messages<Message: Decodable & Sendable>: AsyncSequence, Sendable {
        /// A message and where it came from.
        public typealias Element = (Message, MessageContext)
        /// The sequence never throws: it ends when the session is invalidated.
        public typealias Failure = Never
        let base: AsyncStream<InboundMessage>
        let tag: String
        let own: String

        /// An iterator over the messages from the moment the sequence was made.
        public func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), tag: tag, own: own) }

        /// Skips other types, this messenger's own messages and values that do not decode.
        public struct Iterator: AsyncIteratorProtocol {
            var base: AsyncStream<InboundMessage>.Iterator
            let tag: String
            let own: String
            /// The next message of this type, or nil once the session is invalidated.
            public mutating func next() async -> (Message, MessageContext)? {
                while let m = await base.next() {
                    guard m.tag == tag, m.sender != own, let value = try? JSONCoding.decode(Message.self, from: m.value) else { continue }
                    return (value, MessageContext(source: m.source))
                }
                return nil
            }
        }
    }

    private let hub: SessionHub
    /// The delivery mode of every `send`.
    public let deliveryMode: DeliveryMode
    /// Names this messenger in its envelopes, so it can skip its own messages.
    private let sender = String(UInt64.random(in: 0...UInt64.max), radix: 16)

    /// A messenger on `session`.
    public init<A>(session: GroupSession<A>, deliveryMode: DeliveryMode = .reliable) {
        hub = session.hub
        self.deliveryMode = deliveryMode
    }

    /// Sends `value` to `participants`. Throws `.tooLarge` over the node's message limit (64 KiB,
    /// 1 KiB unreliable), `.busy` when the session cannot take more right now. Sending `.only` to
    /// nobody but `localParticipant` sends nothing (a messenger does not receive its own messages).
    public func send<Message: Encodable>(_ value: Message, to participants: Participants = .all) async throws(HuddleKitError) {
        try hub.requireJoined()
        let text = MessageEnvelope.text(tag: MessageEnvelope.tag(Message.self), sender: sender, value: try JSONCoding.json(value))
        var fields: JSONObject = ["text": .string(text), "reliable": .bool(deliveryMode == .reliable)]
        if case let .only(set) = participants {
            let others = set.filter { $0 != hub.localParticipant }
            guard !others.isEmpty else { return }
            fields["to"] = .array(others.map { .string($0.id) }.sorted { $0.stringValue ?? "" < $1.stringValue ?? "" })
        }
        _ = try await hub.connection.request("send", fields)
    }

    /// The messages sent as `Message` by other messengers, from now on (from `join()` when made
    /// before it), with their source.
    public func messages<Message: Decodable & Sendable>(of type: Message.Type) -> Messages<Message> {
        Messages(base: hub.messageStream(), tag: MessageEnvelope.tag(Message.self), own: sender)
    }
}
