import Foundation
import HuddleControl

/// How HuddleKit tags a message: a binary header sent as the control protocol's `send` field
/// `envelope` (CONTROL.md, issue 38), ahead of the application's payload bytes:
/// `"HK"`, version 3, kind (0: JSON of a `Codable` value, 1: raw `Data`), 8 bytes naming the
/// messenger, a big-endian UInt16 length, the type identifier in UTF-8, then a count (one byte,
/// at most `maximumRecipients`) and that many 8-byte program ids: the participants a directed
/// send (`.only`) is for (none: every program that receives it). The node delivers to members'
/// nodes; the recipients let HuddleKit there hand the message only to the programs it is for.
///
/// Guarantees: the header is at most `maximumHeader` bytes, so it never counts against the node's
/// 64 KiB payload limit (the node allows an envelope of up to 1 KiB on top); `open` reads a body
/// from any peer without trusting it: anything that is not a well-formed header of this version
/// (wrong magic, truncated, an identifier that is not UTF-8) is nil, never a crash.
enum MessageEnvelope {
    static let version: UInt8 = 3
    /// Longest type identifier (UTF-8 bytes), so that the header stays within the node's envelope allowance.
    static let maximumIdentifier = 900
    /// Most recipients one envelope names (a directed send to more goes as several sends).
    static let maximumRecipients = 13
    /// Longest header: magic, version, kind, sender, length, identifier, recipients.
    static let maximumHeader = 2 + 1 + 1 + 8 + 2 + maximumIdentifier + 1 + 8 * maximumRecipients

    /// What the payload is.
    enum Kind: UInt8, Sendable { case json = 0, data = 1 }

    /// The identifier messages of type `T` carry: the one `T` declares (`MessageTypeIdentifying`),
    /// else its fully qualified name (`String(reflecting:)`, module included).
    static func tag<T>(_ type: T.Type) -> String {
        if let declared = type as? any MessageTypeIdentifying.Type { return declared.messageTypeIdentifier }
        return String(reflecting: type)
    }

    /// The header for a message of `kind` and type `tag` from messenger `sender`, for the
    /// programs `recipients` (empty: for every program that receives it).
    static func header(kind: Kind, tag: String, sender: UInt64, recipients: [UInt64] = []) throws(HuddleKitError) -> [UInt8] {
        let id = Array(tag.utf8)
        guard !id.isEmpty, id.count <= maximumIdentifier else {
            throw .encodingFailed("the message type identifier \"\(tag.prefix(80))\" must be 1 to \(maximumIdentifier) UTF-8 bytes")
        }
        guard recipients.count <= maximumRecipients else { throw .encodingFailed("an envelope names at most \(maximumRecipients) recipients") }
        var out: [UInt8] = [0x48, 0x4B, version, kind.rawValue]
        out.reserveCapacity(14 + id.count + 1 + 8 * recipients.count)
        append(sender, to: &out)
        out.append(UInt8(id.count >> 8))
        out.append(UInt8(id.count & 0xFF))
        out += id
        out.append(UInt8(recipients.count))
        for recipient in recipients { append(recipient, to: &out) }
        return out
    }

    private static func append(_ value: UInt64, to out: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    private static func readUInt64(_ body: [UInt8], at start: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in start..<(start + 8) { value = value << 8 | UInt64(body[i]) }
        return value
    }

    /// The kind, tag, sender, recipients and payload of a body; nil for any body that is not a
    /// HuddleKit envelope of this version.
    static func open(_ body: [UInt8]) -> (kind: Kind, tag: String, sender: UInt64, recipients: [UInt64], payload: [UInt8])? {
        guard body.count >= 14, body[0] == 0x48, body[1] == 0x4B, body[2] == version, let kind = Kind(rawValue: body[3]) else { return nil }
        let sender = readUInt64(body, at: 4)
        let length = Int(body[12]) << 8 | Int(body[13])
        guard length > 0, length <= maximumIdentifier, body.count >= 14 + length + 1,
              let tag = String(validating: body[14..<(14 + length)], as: UTF8.self) else { return nil }
        let countAt = 14 + length
        let count = Int(body[countAt])
        let payloadAt = countAt + 1 + 8 * count
        guard count <= maximumRecipients, body.count >= payloadAt else { return nil }
        let recipients = (0..<count).map { readUInt64(body, at: countAt + 1 + 8 * $0) }
        return (kind, tag, sender, recipients, Array(body[payloadAt...]))
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
