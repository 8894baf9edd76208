/// The first membership of Huddle: every member keeps a link to every other (a full mesh).
///
/// Guarantees, given links that deliver in order:
/// - a member is `alive` exactly while this node holds an authenticated link to it;
/// - members learn of each other through the member lists exchanged on links, and the lower
///   member id dials (the higher one dials too if no link appears within `dialGrace`), so the mesh
///   closes without anyone typing `join` more than once;
/// - a closed link marks the member `failed`, or `left` when it said `leave` first; a member id is
///   one run of a node, so a member that failed or left never becomes alive again.
///
/// Pure: no clocks, no sockets. Time comes in as `now` (seconds), decisions go out as `Action`s.
public struct MeshMembership: Sendable {
    public enum Action: Sendable, Equatable {
        /// Open a link to this address (the shell ignores it when a link or dial is already under way).
        case dial(addr: String, member: MemberID)
        /// Tell the control socket.
        case emit(MemberChange, MemberInfo)
        /// Send `.members(list)` to every linked member except `except`.
        case announce([MemberInfo], except: MemberID?)
    }

    public private(set) var local: MemberInfo
    /// Every member this node has seen linked, self included, with its current state.
    public private(set) var members: [MemberID: MemberInfo]
    /// Members heard of from others but not yet linked, with when they were first heard of.
    private var candidates: [MemberID: (info: MemberInfo, since: Double, lastDial: Double)] = [:]
    private var linked: Set<MemberID> = []
    private var saidLeave: Set<MemberID> = []

    /// How long the higher member id waits for the lower one to dial before dialing itself.
    public var dialGrace: Double = 1.0
    /// How often an unlinked candidate is dialed again, and for how long before it is forgotten.
    public var redialInterval: Double = 2.0
    public var candidateLifetime: Double = 60.0

    public init(local: MemberInfo) {
        self.local = local
        members = [local.id: local]
    }

    public var aliveCount: Int { members.values.filter { $0.state == .alive }.count }
    public func isLinked(_ id: MemberID) -> Bool { linked.contains(id) }

    /// The list a new link's peer is told in `hello`: self and every alive member.
    public var aliveMembers: [MemberInfo] { members.values.filter { $0.state == .alive } }

    /// A link to `peer` finished its handshake and was registered.
    public mutating func linkEstablished(_ peer: MemberInfo, now: Double) -> [Action] {
        guard peer.id != local.id else { return [] }
        if let known = members[peer.id], known.state != .alive { return [] }  // a run that ended never returns
        candidates[peer.id] = nil
        let isNew = !linked.contains(peer.id)
        linked.insert(peer.id)
        var info = peer
        info.state = .alive
        members[peer.id] = info
        return isNew ? [.emit(.joined, info), .announce([info], except: peer.id)] : []
    }

    /// A member list arrived on the link from `sender`.
    public mutating func receive(members list: [MemberInfo], from sender: MemberID, now: Double) -> [Action] {
        var actions: [Action] = []
        for m in list where m.id != local.id && members[m.id] == nil && candidates[m.id] == nil && m.state == .alive {
            let dialsNow = local.id < m.id
            candidates[m.id] = (m, now, dialsNow ? now : -.infinity)
            if dialsNow { actions.append(.dial(addr: m.addr, member: m.id)) }
        }
        return actions
    }

    /// `sender` announced that it leaves; its link closing next marks it `left`.
    public mutating func receiveLeave(from sender: MemberID) { saidLeave.insert(sender) }

    /// The link to `peer` closed.
    public mutating func linkClosed(_ peer: MemberID, now: Double) -> [Action] {
        guard linked.remove(peer) != nil, var info = members[peer] else { return [] }
        info.state = saidLeave.contains(peer) ? .left : .failed
        members[peer] = info
        return [.emit(info.state == .left ? .left : .failed, info), .announce([info], except: nil)]
    }

    /// Periodic work: dial candidates whose link has not appeared.
    public mutating func tick(now: Double) -> [Action] {
        var actions: [Action] = []
        for (id, c) in candidates {
            if now - c.since > candidateLifetime {
                candidates[id] = nil
                continue
            }
            let waited = now - c.since >= (local.id < id ? 0 : dialGrace)
            if waited && now - c.lastDial >= redialInterval {
                candidates[id]?.lastDial = now
                actions.append(.dial(addr: c.info.addr, member: id))
            }
        }
        return actions
    }

    /// Of two links to the same member, the one dialed by the lower member id stays.
    public static func keepsNewLink(newDialedBy: MemberID, existingDialedBy: MemberID) -> Bool {
        newDialedBy < existingDialedBy
    }
}
