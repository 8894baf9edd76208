import Foundation
import HuddleControl

/// Sends `Codable` messages to the session's participants and receives them by type, as
/// SharePlay's `GroupSessionMessenger`.
///
/// Guarantees: with `.reliable` delivery, every participant that stays in the session receives each
/// message once, in causal order (the node's causal broadcast); with `.unreliable`, at most once
/// (one datagram, ≤ 1 KiB). A program never receives its own messages (those any messenger of its
/// session sent), and each message names the participant that sent it; `messages(of:)` yields
/// only messages sent as that type (its fully qualified identifier, never the bare name), and skips
/// those that do not decode as it; a body from a peer that is not a HuddleKit envelope is ignored.
public final class GroupSessionMessenger: Sendable {
    /// How messages travel.
    public enum DeliveryMode: Sendable {
        /// Causal reliable broadcast (or a directed send): exactly once, in causal order.
        case reliable
        /// One datagram, best effort: may be lost, never delivered twice; bodies up to 1 KiB.
        case unreliable
    }

    /// Who a message goes to, as SharePlay's `Participants`: `.all`, `.only(participant)` or `.only(set)`.
    public struct Participants: Sendable, Equatable {
        /// nil for every participant; else these participants (a directed send).
        let recipients: Set<Participant>?
        /// Every participant of the session.
        public static let all = Participants(recipients: nil)
        /// Only these participants (a directed send).
        public static func only(_ participants: Set<Participant>) -> Participants { Participants(recipients: participants) }
        /// Only this participant.
        public static func only(_ participant: Participant) -> Participants { Participants(recipients: [participant]) }
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
        let own: UInt64

        /// An iterator over the messages from the moment the sequence was made.
        public func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), tag: tag, own: own) }

        /// Skips other types, this messenger's own messages and values that do not decode.
        public struct Iterator: AsyncIteratorProtocol {
            var base: AsyncStream<InboundMessage>.Iterator
            let tag: String
            let own: UInt64
            /// The next message of this type, or nil once the session is invalidated.
            public mutating func next() async -> (Message, MessageContext)? {
                while let m = await base.next() {
                    guard m.tag == tag, m.sender != own, let value = Self.decode(m) else { continue }
                    return (value, MessageContext(source: m.source))
                }
                return nil
            }

            /// Raw bytes for `Data`, JSON for anything else; nil when the payload is not a `Message`.
            private static func decode(_ m: InboundMessage) -> Message? {
                switch m.kind {
                case .data: return Data(m.payload) as? Message
                case .json: return try? JSONDecoder().decode(Message.self, from: Data(m.payload))
                }
            }
        }
    }

    /// What a send did: the recipients of an `.only` send it skipped because they had left.
    public struct SendReceipt: Sendable, Equatable {
        /// Recipients no longer in the session (failed, left or unknown): they did not get the message.
        public let skipped: Set<Participant>
    }

    private let hub: SessionHub
    /// The delivery mode of every `send`.
    public let deliveryMode: DeliveryMode
    /// Names this program (its participant's id) in its envelopes: receivers know which
    /// participant sent a message, and this program skips its own.
    private let sender: UInt64

    /// A messenger on `session`.
    public init<A>(session: GroupSession<A>, deliveryMode: DeliveryMode = .reliable) {
        hub = session.hub
        self.deliveryMode = deliveryMode
        sender = session.hub.localParticipant.program ?? 0
    }

    /// Sends `value` to `participants`: a `Data` value as its bytes, anything else as JSON, tagged
    /// with the type's identifier (`MessageTypeIdentifying`). Throws `.tooLarge` when the payload
    /// (the bytes or the JSON, not HuddleKit's header) is over the node's limit (64 KiB reliable;
    /// unreliable: 1 KiB including a header of 15 bytes plus the identifier, plus 8 per `.only`
    /// recipient), `.busy` when the session
    /// cannot take more right now.
    ///
    /// `.only(set)` sends to the recipients still in the session and reports the others in the
    /// receipt's `skipped` instead of failing for everyone; sending `.only` to nobody but
    /// `localParticipant` (or only to departed ones) sends nothing. A directed send goes to the
    /// recipients' nodes, and there only to the programs it names (other programs of the activity
    /// on those nodes never see it); past `MessageEnvelope.maximumRecipients` recipients it goes as
    /// several sends.
    @discardableResult
    public func send<Message: Encodable>(_ value: Message, to participants: Participants = .all) async throws(HuddleKitError) -> SendReceipt {
        try await hub.requireJoined()
        let payload: [UInt8]
        let kind: MessageEnvelope.Kind
        if let data = value as? Data {
            payload = Array(data)
            kind = .data
        } else {
            do { payload = Array(try JSONEncoder().encode(value)) } catch { throw .encodingFailed("\(Message.self): \(error)") }
            kind = .json
        }
        let tag = MessageEnvelope.tag(Message.self)
        let reliable = deliveryMode == .reliable
        // The send of `payload` behind `header` (the node takes the header as the `envelope`).
        func sendRequest(_ header: [UInt8], to: [String]?) -> ControlRequest {
            .send(.init(body: header + payload, to: to, reliable: reliable, envelope: header.count))
        }
        guard let set = participants.recipients else {
            _ = try await hub.connection.request(sendRequest(try MessageEnvelope.header(kind: kind, tag: tag, sender: sender), to: nil))
            return SendReceipt(skipped: [])
        }
        // A participant is addressed by its program id; one without a well-formed id cannot be.
        let wanted = set.filter { $0 != hub.localParticipant }
        let addressable = wanted.filter { $0.program != nil }
        var live = hub.participants
        var reached: Set<Participant> = []
        for attempt in 0..<2 {
            let targets = addressable.intersection(live)
            guard !targets.isEmpty else { return SendReceipt(skipped: wanted) }
            do {
                // Each send names its recipients (at most `maximumRecipients`) and goes to their nodes;
                // after a retry, those already reached are not sent to again.
                let pending = targets.subtracting(reached).sorted { ($0.member, $0.id) < ($1.member, $1.id) }
                for start in stride(from: 0, to: pending.count, by: MessageEnvelope.maximumRecipients) {
                    let group = pending[start..<min(start + MessageEnvelope.maximumRecipients, pending.count)]
                    let header = try MessageEnvelope.header(kind: kind, tag: tag, sender: sender, recipients: group.compactMap(\.program))
                    _ = try await hub.connection.request(sendRequest(header, to: Set(group.map(\.member)).sorted()))
                    reached.formUnion(group)
                }
                return SendReceipt(skipped: wanted.subtracting(reached))
            } catch {
                // A recipient left between our view and the node's: ask the node who is live, once.
                switch error {
                case .notMember, .notFound:
                    guard attempt == 0 else { throw error }
                    live = try await hub.liveParticipants()
                default: throw error
                }
            }
        }
        throw .nodeFailed("the node refused the recipients it reported live")
    }

    /// The messages sent as `Message` by other messengers (matched by the type's identifier, see
    /// `MessageTypeIdentifying`), from now on (from `join()` when made before it), with their
    /// source. `Data.self` receives the raw bytes sent with `send(Data)`.
    public func messages<Message: Decodable & Sendable>(of type: Message.Type) -> Messages<Message> {
        Messages(base: hub.messageStream(), tag: MessageEnvelope.tag(Message.self), own: sender)
    }
}
