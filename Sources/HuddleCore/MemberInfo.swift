/// Liveness of a member as this node sees it.
public enum MemberState: UInt8, Sendable, CustomStringConvertible {
    case alive = 0, suspect = 1, failed = 2, left = 3
    public var description: String {
        switch self {
        case .alive: "alive"
        case .suspect: "suspect"
        case .failed: "failed"
        case .left: "left"
        }
    }
}

/// What the session knows of one member: who it is, where it listens, and its state.
public struct MemberInfo: Sendable, Equatable {
    public var id: MemberID
    /// The node's Ed25519 public key.
    public var node: [UInt8]
    public var name: String
    /// Advertised `host:port` (TCP links and UDP datagrams).
    public var addr: String
    public var state: MemberState
    public var incarnation: UInt64

    public init(id: MemberID, node: [UInt8], name: String, addr: String, state: MemberState = .alive, incarnation: UInt64 = 0) {
        self.id = id; self.node = node; self.name = name; self.addr = addr; self.state = state; self.incarnation = incarnation
    }

    func encode(into w: inout WireWriter) {
        w.member(id); w.bytes16(node); w.string16(name); w.string16(addr); w.u8(state.rawValue); w.u64(incarnation)
    }

    static func decode(from r: inout WireReader) throws(WireError) -> MemberInfo {
        let id = try r.member()
        let node = try r.bytes16("node key")
        guard node.count == 32 else { throw WireError("node key of \(node.count) bytes, expected 32") }
        let name = try r.string16("name")
        let addr = try r.string16("address")
        guard let state = MemberState(rawValue: try r.u8("state")) else { throw WireError("unknown member state") }
        // A record that suspects or fails its member must leave it an incarnation to refute with.
        let claim = state == .suspect || state == .failed
        let incarnation = claim ? try r.outbiddableCount("incarnation") : try r.count("incarnation")
        return MemberInfo(id: id, node: node, name: name, addr: addr, state: state, incarnation: incarnation)
    }

    /// Smallest encoding: id, two empty strings' lengths, 32-byte key with length, state, incarnation.
    static let minimumEncodedSize = 8 + 2 + 32 + 2 + 2 + 1 + 8
}

extension MemberInfo {
    /// The handshake payload form: a member introduces itself with this when a link opens.
    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: 96)
        w.u8(1)
        encode(into: &w)
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> MemberInfo {
        var r = WireReader(bytes)
        guard try r.u8("version") == 1 else { throw WireError("unsupported member record version") }
        let info = try decode(from: &r)
        try r.expectEnd("member record")
        return info
    }
}
