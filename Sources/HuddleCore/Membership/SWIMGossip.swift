/// One membership update as it is piggybacked on probes and gossip datagrams (SWIM §4).
///
/// Guarantees: `alive` carries the whole member record (so a member can be learned from it);
/// `suspect`, `failed` and `left` carry only id and incarnation (and the suspecter, for Lifeguard's
/// confirmations), and are ignored by receivers that do not know the member. Encoded sizes are
/// exact (`encodedSize`), so a sender can fill a datagram to its byte budget.
public enum SWIMGossip: Sendable, Equatable {
    /// The member is alive at this incarnation, with this metadata (join, refutation, update).
    case alive(MemberInfo)
    /// `from` suspects the member at this incarnation.
    case suspect(MemberID, incarnation: UInt64, from: MemberID)
    /// `from` declared the member failed at this incarnation.
    case failed(MemberID, incarnation: UInt64, from: MemberID)
    /// The member left gracefully (it gossips this itself, with its incarnation bumped).
    case left(MemberID, incarnation: UInt64)

    /// The member this update is about.
    public var member: MemberID {
        switch self {
        case let .alive(info): info.id
        case let .suspect(id, _, _), let .failed(id, _, _), let .left(id, _): id
        }
    }

    public var incarnation: UInt64 {
        switch self {
        case let .alive(info): info.incarnation
        case let .suspect(_, inc, _), let .failed(_, inc, _), let .left(_, inc): inc
        }
    }

    /// Bytes this update takes on the wire.
    public var encodedSize: Int {
        switch self {
        case let .alive(info): 1 + 8 + 2 + info.node.count + 2 + info.name.utf8.count + 2 + info.addr.utf8.count + 1 + 8
        case .suspect, .failed: 1 + 8 + 8 + 8
        case .left: 1 + 8 + 8
        }
    }

    /// The smallest encoded update (`left`).
    static let minimumEncodedSize = 17

    func encode(into w: inout WireWriter) {
        switch self {
        case let .alive(info):
            w.u8(1)
            var record = info
            record.state = .alive
            record.encode(into: &w)
        case let .suspect(id, inc, from): w.u8(2); w.member(id); w.u64(inc); w.member(from)
        case let .failed(id, inc, from): w.u8(3); w.member(id); w.u64(inc); w.member(from)
        case let .left(id, inc): w.u8(4); w.member(id); w.u64(inc)
        }
    }

    static func decode(from r: inout WireReader) throws(WireError) -> SWIMGossip {
        switch try r.u8("gossip kind") {
        case 1:
            var info = try MemberInfo.decode(from: &r)
            guard info.state == .alive else { throw WireError("alive gossip with state \(info.state)") }
            info.state = .alive
            return .alive(info)
        case 2: return .suspect(try r.member(), incarnation: try r.outbiddableCount("incarnation"), from: try r.member("suspecter"))
        case 3: return .failed(try r.member(), incarnation: try r.outbiddableCount("incarnation"), from: try r.member("declarer"))
        case 4: return .left(try r.member(), incarnation: try r.count("incarnation"))
        case let kind: throw WireError("unknown gossip kind \(kind)")
        }
    }
}
