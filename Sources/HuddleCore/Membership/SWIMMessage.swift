/// A SWIM datagram: a probe, a probe reply or plain gossip, with piggybacked updates
/// (SWIM §3–4, Lifeguard §IV.A nacks).
///
/// Wire form: `version (1) | kind | sender id | kind fields | gossip count (u8) | updates`.
/// Guarantees: `decode` checks every length before it reads or allocates and throws `CoreError`
/// on anything malformed, truncated, or followed by trailing bytes — it never traps; a message
/// built by `SWIMInstance` encodes to at most `SWIMSettings.maxMessageBytes`.
public struct SWIMMessage: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Direct probe; only the member `target` answers (a restarted node at the same address is a
        /// different member and stays silent).
        case ping(seq: UInt32, target: MemberID)
        /// The answer to a ping (or a helper relaying the target's answer) with the prober's seq.
        case ack(seq: UInt32)
        /// Ask a helper to ping `target` at `targetAddr` and relay the ack (SWIM §3.1 indirect probe).
        case pingReq(seq: UInt32, target: MemberID, targetAddr: String)
        /// A helper did not hear from the target in time (Lifeguard §IV.A): proof the helper and the
        /// path to it work, so a missing nack points at the prober itself.
        case nack(seq: UInt32)
        /// Updates only.
        case gossip
    }

    public var sender: MemberID
    public var kind: Kind
    public var gossip: [SWIMGossip]

    public init(sender: MemberID, kind: Kind, gossip: [SWIMGossip] = []) {
        self.sender = sender; self.kind = kind; self.gossip = gossip
    }

    public static let version: UInt8 = 1
    static let maxGossip = 255

    /// Bytes of everything but the updates.
    public var headerSize: Int {
        let fields: Int
        switch kind {
        case .ping: fields = 4 + 8
        case .ack, .nack: fields = 4
        case let .pingReq(_, _, addr): fields = 4 + 8 + 2 + addr.utf8.count
        case .gossip: fields = 0
        }
        return 1 + 1 + 8 + fields + 1
    }

    public var encodedSize: Int { gossip.reduce(headerSize) { $0 + $1.encodedSize } }

    public func encode() -> [UInt8] {
        var w = WireWriter(capacity: encodedSize)
        w.u8(Self.version)
        switch kind {
        case let .ping(seq, target): w.u8(1); w.member(sender); w.u32(seq); w.member(target)
        case let .ack(seq): w.u8(2); w.member(sender); w.u32(seq)
        case let .pingReq(seq, target, addr): w.u8(3); w.member(sender); w.u32(seq); w.member(target); w.string16(addr)
        case let .nack(seq): w.u8(4); w.member(sender); w.u32(seq)
        case .gossip: w.u8(5); w.member(sender)
        }
        let updates = gossip.prefix(Self.maxGossip)
        w.u8(UInt8(updates.count))
        for g in updates { g.encode(into: &w) }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> SWIMMessage {
        var r = WireReader(bytes)
        let version = try r.u8("version")
        guard version == Self.version else { throw CoreError("unsupported SWIM message version \(version)") }
        let code = try r.u8("message kind")
        let sender = try r.member("sender")
        let kind: Kind
        switch code {
        case 1: kind = .ping(seq: try r.u32("seq"), target: try r.member("target"))
        case 2: kind = .ack(seq: try r.u32("seq"))
        case 3: kind = .pingReq(seq: try r.u32("seq"), target: try r.member("target"), targetAddr: try r.string16("target address"))
        case 4: kind = .nack(seq: try r.u32("seq"))
        case 5: kind = .gossip
        default: throw CoreError("unknown SWIM message kind \(code)")
        }
        let count = Int(try r.u8("gossip count"))
        guard count * SWIMGossip.minimumEncodedSize <= r.remaining else { throw CoreError("truncated gossip") }
        var gossip: [SWIMGossip] = []
        gossip.reserveCapacity(count)
        for _ in 0..<count { gossip.append(try SWIMGossip.decode(from: &r)) }
        try r.expectEnd("SWIM message")
        return SWIMMessage(sender: sender, kind: kind, gossip: gossip)
    }
}
