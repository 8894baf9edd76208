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

/// A signed claim that a member is suspect or failed: who claims it, and the claimer's signature
/// over `MembershipStatement.claim` (the kind is the record's state).
public struct MemberClaim: Sendable, Equatable {
    public var from: MemberID
    public var signature: [UInt8]
    public init(from: MemberID, signature: [UInt8]) { self.from = from; self.signature = signature }
}

/// What the session knows of one member: who it is, where it listens, and its state.
///
/// The record (id, node key, name, address, incarnation) is the member's own word: `proof` is its
/// signature over it (`MembershipStatement.alive`), or over its `left` once it left. A suspect or
/// failed state is somebody else's word, carried beside the record as a signed `claim`: a claim
/// changes the state, never the record.
public struct MemberInfo: Sendable, Equatable {
    public var id: MemberID
    /// The node's Ed25519 public key.
    public var node: [UInt8]
    public var name: String
    /// Advertised `host:port` (TCP links and UDP datagrams).
    public var addr: String
    public var state: MemberState
    public var incarnation: UInt64
    /// The member's signature over this record at `incarnation` (or over its `left`).
    public var proof: [UInt8]
    /// Who says the member is suspect or failed (with those states only).
    public var claim: MemberClaim?
    /// Other addresses others may try besides `addr` (its reflexive address behind an easy NAT,
    /// issue 36): at most `maximumReach`, each a numeric `host:port`; part of what `proof` signs.
    public var reach: [String]

    public init(id: MemberID, node: [UInt8], name: String, addr: String, state: MemberState = .alive, incarnation: UInt64 = 0,
                proof: [UInt8] = [], claim: MemberClaim? = nil, reach: [String] = []) {
        self.id = id; self.node = node; self.name = name; self.addr = addr; self.state = state; self.incarnation = incarnation
        self.proof = proof; self.claim = claim; self.reach = reach
    }

    /// Most `reach` addresses a record carries.
    public static let maximumReach = 4

    /// The largest signature field accepted (Ed25519: 64 bytes).
    static let maxSignature = 64
    /// The longest name (UTF-8 bytes) and address a record may carry; a record above either is
    /// refused by `decode`. They bound a record at about 520 bytes, so a push-pull part
    /// (`SWIMPushPull.parts`) holds hundreds of them and a member table of 1024 members fits in a
    /// few parts (at 64 KiB each, one record of a member made every push-pull of its sponsor pass
    /// the link's message limit). An address is a numeric `host:port` (`HostPort.numeric`).
    public static let maximumName = 256
    public static let maximumAddress = 64

    /// Why this member's own name or address cannot go into its record (nil when both can): a
    /// name above `maximumName` bytes, an address above `maximumAddress` bytes or not a numeric
    /// `host:port` (peers refuse a hostname: they never look one up).
    public static func ownRecordProblem(name: String, addr: String) -> String? {
        if name.utf8.count > maximumName { return "the name is \(name.utf8.count) bytes long (at most \(maximumName))" }
        if addr.utf8.count > maximumAddress { return "the advertised address \(addr) is \(addr.utf8.count) bytes long (at most \(maximumAddress))" }
        if !HostPort.isNumeric(addr) {
            return "the advertised address \(addr) is not a numeric IPv4 or [IPv6] host:port with a port 1-65535 (peers never look a hostname up)"
        }
        return nil
    }

    func encode(into w: inout WireWriter) {
        w.member(id); w.bytes16(node); w.string16(name); w.string16(addr); w.u8(state.rawValue); w.u64(incarnation)
        w.bytes16(proof)
        if let claim, state == .suspect || state == .failed {
            w.u8(1); w.member(claim.from); w.bytes16(claim.signature)
        } else {
            w.u8(0)
        }
        w.u8(UInt8(reach.prefix(Self.maximumReach).count))
        for addr in reach.prefix(Self.maximumReach) { w.string16(addr) }
    }

    /// Bytes `encode` writes.
    var encodedSize: Int {
        8 + 2 + node.count + 2 + name.utf8.count + 2 + addr.utf8.count + 1 + 8 + 2 + proof.count + 1
            + ((state == .suspect || state == .failed) ? claim.map { 8 + 2 + $0.signature.count } ?? 0 : 0)
            + 1 + reach.prefix(Self.maximumReach).reduce(0) { $0 + 2 + $1.utf8.count }
    }

    static func decode(from r: inout WireReader) throws(CoreError) -> MemberInfo {
        let id = try r.member()
        let node = try r.bytes16("node key")
        guard node.count == 32 else { throw CoreError("node key of \(node.count) bytes, expected 32") }
        let name = try r.string16("name", limit: maximumName)
        let addr = try r.string16("address", limit: maximumAddress)
        guard let state = MemberState(rawValue: try r.u8("state")) else { throw CoreError("unknown member state") }
        // Only the member raises its incarnation, one at a time: a record or claim past
        // `madeCountLimit` names one it never made (and would leave no room to refute a suspicion).
        let claim = state == .suspect || state == .failed
        let incarnation = try r.madeCount("incarnation")
        let proof = try r.signature("proof")
        var claimed: MemberClaim?
        switch try r.u8("claim flag") {
        case 0: break
        case 1:
            guard claim else { throw CoreError("a claim on a member record in state \(state)") }
            claimed = MemberClaim(from: try r.member("claimer"), signature: try r.signature("claim signature"))
        default: throw CoreError("bad claim flag")
        }
        let n = Int(try r.u8("reach count"))
        guard n <= maximumReach else { throw CoreError("\(n) reach addresses in a member record (at most \(maximumReach))") }
        var reach: [String] = []
        for _ in 0..<n {
            let addr = try r.string16("reach address", limit: maximumAddress)
            guard HostPort.isNumeric(addr) else { throw CoreError("a reach address that is not a numeric host:port") }
            reach.append(addr)
        }
        return MemberInfo(id: id, node: node, name: name, addr: addr, state: state, incarnation: incarnation, proof: proof, claim: claimed, reach: reach)
    }

    /// Smallest encoding: id, two empty strings' lengths, 32-byte key with length, state,
    /// incarnation, an empty proof's length, the claim flag, the reach count.
    static let minimumEncodedSize = 8 + 2 + 32 + 2 + 2 + 1 + 8 + 2 + 1 + 1
}

extension MemberInfo {
    /// The handshake payload form: a member introduces itself with this when a link opens.
    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: 96)
        w.u8(2)
        encode(into: &w)
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> MemberInfo {
        var r = WireReader(bytes)
        guard try r.u8("version") == 2 else { throw CoreError("unsupported member record version") }
        let info = try decode(from: &r)
        try r.expectEnd("member record")
        return info
    }
}
