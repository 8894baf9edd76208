import Foundation
import HuddleControl

/// How HuddleKit tags a message: a binary header sent as the control protocol's `send` field
/// `envelope` (CONTROL.md, issue 38), ahead of the application's payload bytes:
/// `"HK"`, version 2, kind (0: JSON of a `Codable` value, 1: raw `Data`), 8 bytes naming the
/// messenger, a big-endian UInt16 length, then the type identifier in UTF-8.
///
/// Guarantees: the header is at most `maximumHeader` bytes, so it never counts against the node's
/// 64 KiB payload limit (the node allows an envelope of up to 1 KiB on top); `open` reads a body
/// from any peer without trusting it: anything that is not a well-formed header of this version
/// (wrong magic, truncated, an identifier that is not UTF-8) is nil, never a crash.
enum MessageEnvelope {
    static let version: UInt8 = 2
    /// Longest type identifier (UTF-8 bytes), so that the header stays within the node's envelope allowance.
    static let maximumIdentifier = 900
    /// Longest header: magic, version, kind, sender, length, identifier.
    static let maximumHeader = 2 + 1 + 1 + 8 + 2 + maximumIdentifier

    /// What the payload is.
    enum Kind: UInt8, Sendable { case json = 0, data = 1 }

    /// The identifier messages of type `T` carry: the one `T` declares (`MessageTypeIdentifying`),
    /// else its fully qualified name (`String(reflecting:)`, module included).
    static func tag<T>(_ type: T.Type) -> String {
        if let declared = type as? any MessageTypeIdentifying.Type { return declared.messageTypeIdentifier }
        return String(reflecting: type)
    }

    /// The header for a message of `kind` and type `tag` from messenger `sender`.
    static func header(kind: Kind, tag: String, sender: UInt64) throws(HuddleKitError) -> [UInt8] {
        let id = Array(tag.utf8)
        guard !id.isEmpty, id.count <= maximumIdentifier else {
            throw .encodingFailed("the message type identifier \"\(tag.prefix(80))\" must be 1 to \(maximumIdentifier) UTF-8 bytes")
        }
        var out: [UInt8] = [0x48, 0x4B, version, kind.rawValue]
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: sender >> UInt64(shift))) }
        out.append(UInt8(id.count >> 8))
        out.append(UInt8(id.count & 0xFF))
        return out + id
    }

    /// The kind, tag, sender and payload of a body; nil for any body that is not a HuddleKit envelope.
    static func open(_ body: [UInt8]) -> (kind: Kind, tag: String, sender: UInt64, payload: [UInt8])? {
        guard body.count >= 14, body[0] == 0x48, body[1] == 0x4B, body[2] == version, let kind = Kind(rawValue: body[3]) else { return nil }
        var sender: UInt64 = 0
        for i in 4..<12 { sender = sender << 8 | UInt64(body[i]) }
        let length = Int(body[12]) << 8 | Int(body[13])
        guard length > 0, length <= maximumIdentifier, body.count >= 14 + length,
              let tag = String(validating: body[14..<(14 + length)], as: UTF8.self) else { return nil }
        return (kind, tag, sender, Array(body[(14 + length)...]))
    }
}

/// A message type that names itself on the wire. Without it, a type is identified by its fully
/// qualified name (`String(reflecting:)`, e.g. `DrawTogether.Stroke`), so two programs exchange it
/// only when both define it in a module of the same name; declaring one lets programs built
/// differently (another module name, another language) agree on it.
///
/// Guarantees: `messages(of:)` yields only messages whose identifier equals the receiving type's,
/// byte for byte; a bare name (`Note`) is never enough to match `A.Note` against `B.Note`.
public protocol MessageTypeIdentifying {
    /// The identifier this type's messages carry (1 to 900 UTF-8 bytes); by default the fully qualified name.
    static var messageTypeIdentifier: String { get }
}

extension MessageTypeIdentifying {
    /// The fully qualified type name, module included (`String(reflecting:)`).
    public static var messageTypeIdentifier: String { String(reflecting: Self.self) }
}

/// A message event of the node, opened: what `GroupSessionMessenger.messages(of:)` filters and decodes.
struct InboundMessage: Sendable {
    let kind: MessageEnvelope.Kind
    let tag: String
    let sender: UInt64
    let payload: [UInt8]
    let source: Participant
}
