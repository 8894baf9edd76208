/// One membership update as it is piggybacked on probes and gossip datagrams (SWIM §4).
///
/// Guarantees: `alive` carries the whole member record with the member's own signature (`proof`),
/// so a member can be learned from it; `left` carries the member's signature over its leave;
/// `suspect` and `failed` carry the claimer (`from`, for Lifeguard's confirmations) and the
/// claimer's signature. Receivers check every signature before an update changes anything
/// (`SWIMInstance.apply`). Encoded sizes are exact (`encodedSize`), so a sender can fill a
/// datagram to its byte budget.
public enum SWIMGossip: Sendable, Equatable {
    /// The member is alive at this incarnation, with this metadata (join, refutation, update).
    case alive(MemberInfo)
    /// `from` suspects the member at this incarnation.
    case suspect(MemberID, incarnation: UInt64, from: MemberID, signature: [UInt8] = [])
    /// `from` declared the member failed at this incarnation.
    case failed(MemberID, incarnation: UInt64, from: MemberID, signature: [UInt8] = [])
    /// The member left gracefully (it gossips this itself, with its incarnation bumped).
    case left(MemberID, incarnation: UInt64, signature: [UInt8] = [])

    /// The member this update is about.
    public var member: MemberID {
        switch self {
        case let .alive(info): info.id
        case let .suspect(id, _, _, _), let .failed(id, _, _, _), let .left(id, _, _): id
        }
    }

    public var incarnation: UInt64 {
        switch self {
        case let .alive(info): info.incarnation
        case let .suspect(_, inc, _, _), let .failed(_, inc, _, _), let .left(_, inc, _): inc
        }
    }

    /// Bytes this update takes on the wire.
    public var encodedSize: Int {
        switch self {
        case let .alive(info):
            var record = info
            record.state = .alive
            record.claim = nil
            return 1 + record.encodedSize
        case let .suspect(_, _, _, signature), let .failed(_, _, _, signature): return 1 + 8 + 8 + 8 + 2 + signature.count
        case let .left(_, _, signature): return 1 + 8 + 8 + 2 + signature.count
        }
    }

    /// The smallest encoded update (`left` with no signature).
    static let minimumEncodedSize = 19

    func encode(into w: inout WireWriter) {
        switch self {
        case let .alive(info):
            w.u8(1)
            var record = info
            record.state = .alive
            record.claim = nil
            record.encode(into: &w)
        case let .suspect(id, inc, from, signature): w.u8(2); w.member(id); w.u64(inc); w.member(from); w.bytes16(signature)
        case let .failed(id, inc, from, signature): w.u8(3); w.member(id); w.u64(inc); w.member(from); w.bytes16(signature)
        case let .left(id, inc, signature): w.u8(4); w.member(id); w.u64(inc); w.bytes16(signature)
        }
    }

    static func decode(from r: inout WireReader) throws(CoreError) -> SWIMGossip {
        switch try r.u8("gossip kind") {
        case 1:
            let info = try MemberInfo.decode(from: &r)
            guard info.state == .alive else { throw CoreError("alive gossip with state \(info.state)") }
            return .alive(info)
        case 2:
            return .suspect(try r.member(), incarnation: try r.madeCount("incarnation"), from: try r.member("suspecter"),
                            signature: try r.signature())
        case 3:
            return .failed(try r.member(), incarnation: try r.madeCount("incarnation"), from: try r.member("declarer"),
                           signature: try r.signature())
        case 4: return .left(try r.member(), incarnation: try r.madeCount("incarnation"), signature: try r.signature())
        case let kind: throw CoreError("unknown gossip kind \(kind)")
        }
    }
}
