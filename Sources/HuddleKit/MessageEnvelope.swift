import HuddleControl

/// How HuddleKit carries a typed message inside the `text` of a control-protocol message:
/// `{"huddlekit":1,"type":TAG,"sender":NONCE,"value":VALUE}`.
///
/// Guarantees: the tag names the Swift type (`String(describing:)`, so the same type name in two
/// programs matches); `sender` names the messenger that sent it, so a messenger never receives its
/// own messages while another program on the same node does; bodies that are not envelopes of this
/// version are recognised and left alone (`open` returns nil), never fatal.
enum MessageEnvelope {
    static let version: Int64 = 1

    /// The tag messages of type `T` carry.
    static func tag<T>(_ type: T.Type) -> String { String(describing: type) }

    static func text(tag: String, sender: String, value: JSON) -> String {
        JSON.object(["huddlekit": .int(version), "type": .string(tag), "sender": .string(sender), "value": value]).serialized
    }

    /// The tag, sender and value of an envelope; nil for any other body.
    static func open(_ text: String) -> (tag: String, sender: String, value: JSON)? {
        guard case let .object(o)? = try? JSON.parse(text), o["huddlekit"]?.intValue == version,
              let tag = o["type"]?.stringValue, let sender = o["sender"]?.stringValue, let value = o["value"] else { return nil }
        return (tag, sender, value)
    }
}

/// A message event of the node, opened: what `GroupSessionMessenger.messages(of:)` filters and decodes.
struct InboundMessage: Sendable {
    let tag: String
    let sender: String
    let value: JSON
    let source: Participant
}
