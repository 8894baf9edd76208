import HuddleControl

/// One program taking part in the activity, as `GroupSession.activeParticipants` lists it (issue 38):
/// a program that joined the session on some member's node, not the node itself.
///
/// Guarantees: two values are equal exactly when they name the same program on the same member
/// (`id` and `member`), so a set of participants keeps one entry per program; a node with no
/// program joined is no participant, a program that joins on a node that was already in the
/// session is a new one, and a node that restarts brings new participants (a new member id).
public struct Participant: Hashable, Identifiable, Sendable, CustomStringConvertible {
    /// The program's id on its member's node (16 hex digits), chosen when its session connected.
    public let id: String
    /// The member its node runs as (16 hex digits), unique per run of a node.
    public let member: String
    /// The node key (Ed25519 public key, hex): the same across restarts only with `huddle run --identity`.
    public let node: String
    /// The name the node was started with (`huddle run --name`).
    public let name: String

    /// A participant: program `id` on `member`; `node` and `name` are what the node reports, when known.
    public init(id: String, member: String, node: String = "", name: String = "") {
        self.id = id
        self.member = member
        self.node = node
        self.name = name
    }

    /// Equal when they name the same program on the same member.
    public static func == (a: Participant, b: Participant) -> Bool { a.id == b.id && a.member == b.member }
    /// Hashes the program and the member.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(member)
    }

    /// The name and the program, or the program alone.
    public var description: String { name.isEmpty ? "\(member)/\(id)" : "\(name) (\(member)/\(id))" }

    /// A participant from a participant object of the control protocol (`participants`,
    /// `participant` events: an extension of CONTROL.md, README "Participants").
    init?(participant object: JSONObject) {
        guard let p = try? ControlParticipant(object) else { return nil }
        self.init(p)
    }

    /// The participant a reply names.
    init(_ p: ControlParticipant) {
        self.init(id: p.id, member: p.member, node: p.node, name: p.name)
    }

    /// A fresh program id (64 random bits).
    static func newProgram() -> UInt64 { UInt64.random(in: 1...UInt64.max) }

    /// A program id as the control protocol writes it: 16 hex digits.
    static func programID(_ program: UInt64) -> String {
        let hex = String(program, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The program id's value (nil when `id` is not 16 hex digits).
    var program: UInt64? { id.utf8.count == 16 ? UInt64(id, radix: 16) : nil }
}
