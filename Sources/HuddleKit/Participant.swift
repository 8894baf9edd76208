import HuddleControl

/// One member of the session, as `GroupSession.activeParticipants` lists it: a run of one node.
///
/// Guarantees: two values are equal exactly when they name the same member (`id`), so a set of
/// participants keeps one entry per member even when its name or state changes; a node that
/// restarts is a new participant (a new member id), as a device that rejoins a call is in SharePlay.
public struct Participant: Hashable, Identifiable, Sendable, CustomStringConvertible {
    /// The member id (16 hex digits), unique per run of a node.
    public let id: String
    /// The node key (Ed25519 public key, hex): the same across restarts only with `huddle run --identity`.
    public let node: String
    /// The name the node was started with (`huddle run --name`).
    public let name: String

    /// A participant for member `id`; `node` and `name` are what the node reports, when known.
    public init(id: String, node: String = "", name: String = "") {
        self.id = id
        self.node = node
        self.name = name
    }

    /// Equal when they name the same member.
    public static func == (a: Participant, b: Participant) -> Bool { a.id == b.id }
    /// Hashes the member id only.
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The name and the member id, or the member id alone.
    public var description: String { name.isEmpty ? id : "\(name) (\(id))" }

    /// A participant from a member object of the control protocol (`members`, `member` events).
    init?(member object: JSONObject) {
        guard let id = object["member"]?.stringValue else { return nil }
        self.init(id: id, node: object["node"]?.stringValue ?? "", name: object["name"]?.stringValue ?? "")
    }

    /// Whether a member in `state` (CONTROL.md) takes part: alive, or suspected but not yet failed.
    static func isActive(state: String?) -> Bool { state == "alive" || state == "suspect" }
}
