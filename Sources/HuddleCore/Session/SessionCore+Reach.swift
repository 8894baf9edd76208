/// How this member reaches each member, and how members reach it (issue 36, items 1 and 4):
/// observed addresses, the NAT kind (`ReachObservations`), and each member's path.
///
/// Guarantees: a member's `path` is `self` for this member, `relayed` while its link runs over a
/// circuit (`SessionCore+Relay`), `direct` while another link to it is up, `none` otherwise; a live member's path change is a `member` event `path`; only
/// reports from live members (in the table) count towards `nat` and `reflexive`.
extension SessionCore {
    /// How this member reaches a member now (the control protocol's `path`).
    public enum Path: String, Sendable, Equatable {
        case `self`, direct, relayed, none
    }

    public func path(to member: MemberID) -> Path {
        if member == local { return .self }
        guard planner.linked.contains(member) else { return .none }
        return relayedLinks[member] == nil ? .direct : .relayed
    }

    /// The reporters that count: live members.
    private var countedReporters: Set<MemberID> { Set(reach.reports.keys.filter { isLive($0) }) }

    /// This member's NAT kind, from its live peers' reports (`ReachObservations.nat`).
    public var nat: NATKind { reach.nat(advertised: swim.local.addr, counting: countedReporters) }

    /// Where live peers see this member's traffic come from (`ReachObservations.reflexive`).
    public var reflexive: [String] { reach.reflexive(counting: countedReporters) }

    /// The addresses this member's record offers besides `addr` (`MemberInfo.reach`): the
    /// mapping of its listening socket when its NAT is `easy` (one mapping for every member, so
    /// worth trying by any), and only one that two or more live reporters agree they saw its
    /// datagrams come from (`ReachObservations.agreedDatagramSource`, no tie); none otherwise (a
    /// `hard` NAT's mapping serves one observer only; with `none`, `addr` is it; one reporter's
    /// word is `tentativeReach`).
    public var reachAddresses: [String] {
        guard nat == .easy, let agreed = reach.agreedDatagramSource(counting: countedReporters), agreed != swim.local.addr else { return [] }
        return [agreed]
    }

    /// The mapping of this member's listening socket as a lone live reporter saw it
    /// (`ReachObservations.loneDatagramSource`) when its NAT is `easy` and no address is agreed:
    /// offered to relayed peers in punch steps only (`punchAddresses`), never signed. So one
    /// hostile member (say the only public one) cannot make this member advertise an address of
    /// its choosing to everyone; what it can do is bounded by a punch's budgets: the relayed peers
    /// punching with this member dial it within `HolePunch`'s per-pair and node-wide dial limits.
    /// A punch that succeeds through it brings the second reporter that confirms it.
    public var tentativeReach: [String] {
        guard nat == .easy, reachAddresses.isEmpty, let lone = reach.loneDatagramSource(counting: countedReporters),
              lone != swim.local.addr else { return [] }
        return [lone]
    }

    /// Puts `reachAddresses` into this member's signed record (a new incarnation, gossiped as an
    /// update) when they changed; at most once every `ReachObservations.refresh` seconds, and
    /// looked at no more than once a second (not at every tick).
    mutating func publishReach(now: Double) -> [SessionEffect] {
        guard now >= reach.publishedAt + ReachObservations.refresh, now >= reach.publishCheckedAt + 1 else { return [] }
        reach.publishCheckedAt = now
        let wanted = reachAddresses
        guard wanted != swim.local.reach else { return [] }
        reach.publishedAt = now
        return membership(swim.update(reach: wanted, now: now), now: now)
    }

    /// A link to `peer` is up (after `linkUp`): its ends as this member's socket sees them. What
    /// this member sees of the peer goes to it at once; a live member's path becomes `direct`.
    public mutating func linkAddresses(_ peer: MemberID, remote: String, local own: String, now: Double) -> [SessionEffect] {
        reach.linkUp(peer, remote: remote, local: own)
        var out = reachReports(now: now)
        if let info = swim.members[peer], isLive(peer) { out.append(.member(.path, info)) }
        return out
    }

    /// The path event of a link that closed (`linkDown`), for a live member.
    mutating func reachLinkDown(_ peer: MemberID) -> [SessionEffect] {
        reach.linkDown(peer)
        guard let info = swim.members[peer], isLive(peer) else { return [] }
        return [.member(.path, info)]
    }

    /// What this member sees of its linked peers, to those whose view changed or is due again.
    mutating func reachReports(now: Double) -> [SessionEffect] {
        reach.due(now: now).map { .sendLink($0.peer, .observed(link: $0.link ?? "", datagram: $0.datagram ?? "")) }
    }

    /// A linked peer's report of where it sees this member's traffic come from.
    mutating func receiveObserved(link: String, datagram: String, from peer: MemberID, now: Double) -> [SessionEffect] {
        // A relayed link's peer sees this member's traffic only through the relay: what it says it
        // observed is not an observation (and a hostile one could pick the address others dial).
        guard swim.members[peer] != nil, relayedLinks[peer] == nil else { return [] }
        let said = [link, datagram].filter { !$0.isEmpty }
        guard said.allSatisfy(HostPort.isNumeric) else { return refuse(.hostnameAddress) }
        reach.receive(from: peer, link: link.isEmpty ? nil : link, datagram: datagram.isEmpty ? nil : datagram, now: now)
        return []
    }
}
