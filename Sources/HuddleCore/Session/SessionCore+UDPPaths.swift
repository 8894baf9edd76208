/// Punching over UDP (issue 36, item 3): a member whose link comes from behind a NAT or over a
/// relay may still take datagrams at the address its NAT maps its UDP socket to. Every
/// `UDPPaths.interval` this member sends it an empty link-keyed gossip datagram — to the path in
/// use, else to its signed reach addresses and the address its direct link comes from — which
/// opens this member's own NAT towards it; once one of *its* link-keyed datagrams arrives from an
/// address, that is its path (`UDPPaths`), and its unreliable messages go there as datagrams
/// instead of over the link. SWIM keeps to the link for such a member (a path that stops carrying
/// must not fail a member its link still reaches). Between two `easy` NATs both ends' datagrams
/// open both NATs; a `hard` NAT's mapping is per destination, so its reach address is unknown and
/// such a pair stays on its link.
extension SessionCore {
    /// Whether `member`'s datagrams may not arrive at the address it advertises: its link runs over a
    /// relay, or comes from another host than that address.
    func datagramsNeedAPath(_ member: MemberID) -> Bool {
        relayedLinks[member] != nil || linkTranslated(member)
    }

    /// A link-keyed datagram from `member` came from `source`: its path, when it needs one. The
    /// datagram is the member's own (its key, its replay window), but its source address is not
    /// authenticated: one on the path could rewrite it. So a path is only a source on a host the
    /// member is known at — the host of its advertised address, of the address its direct link comes
    /// from, or of a signed reach address — and one another host could send to: a rewritten source
    /// cannot turn this member's datagrams on a third host.
    mutating func noteUDPPath(_ member: MemberID, source: String, now: Double) {
        guard datagramsNeedAPath(member), HostPort.isRemoteUnicast(source), let host = HostPort.numeric(source)?.host else { return }
        let known = ([swim.members[member]?.addr, reach.seen[member]?.link] + (swim.members[member]?.reach ?? []).map(Optional.some))
            .contains { $0.flatMap(HostPort.numeric)?.host == host }
        guard known else { return }
        udpPaths.heard(member, from: source, now: now)
    }

    /// The opening (or keepalive) rounds due at `now` (from `tick`).
    mutating func udpPathTick(now: Double) -> [SessionEffect] {
        guard udpPaths.sweepDue(now: now) else { return [] }
        var out: [SessionEffect] = []
        for peer in planner.linked.sorted() where datagramKeys.has(peer) && datagramsNeedAPath(peer) {
            let targets = udpPaths.address(of: peer).map { [$0] } ?? udpCandidates(peer)
            guard !targets.isEmpty, udpPaths.due(peer, now: now) else { continue }
            for target in targets {
                guard let sending = datagramKeys.nextSend(to: peer) else { break }
                let opening = DatagramPayload(sender: local, counter: sending.counter, content: .swim(SWIMMessage(sender: local, kind: .gossip)))
                out.append(.sendDatagram(opening, to: target, sealing: .link(peer, serial: sending.serial)))
            }
        }
        return out
    }

    /// Where `peer`'s UDP socket may be reached from another host: its signed reach addresses,
    /// then the address its direct link comes from (an `easy` NAT keeps the port), at most
    /// `UDPPaths.maximumTargets`.
    private func udpCandidates(_ peer: MemberID) -> [String] {
        var out = dialableReach(of: peer)
        if relayedLinks[peer] == nil, let link = reach.seen[peer]?.link, HostPort.isRemoteUnicast(link), !out.contains(link) { out.append(link) }
        return Array(out.prefix(UDPPaths.maximumTargets))
    }
}
