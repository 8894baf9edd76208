/// Hole punching (issue 36, item 3): the rules of `HolePunch` fed with what this core knows — which
/// links run through a relay, and the reach addresses in each member's signed record (this
/// member's own included).
///
/// Guarantees:
/// - a pair punches only over its relayed link, and each end dials only addresses the other end
///   signed (`MemberInfo.reach`), within `HolePunch`'s budgets (a `punch` over a direct link, from
///   a member that is not live, or out of turn is refused and counted);
/// - the direct link that comes up replaces the relayed one at both ends
///   (`LinkPlanner.keepsNewLink`), its `path` becomes `direct` (a `member` event `path`), and the
///   circuit under the relayed link is closed with it (asked for again should the direct link fail);
///   what was in flight on the relayed link is repaired by the broadcast's digests.
extension SessionCore {
    /// The live members whose link runs through a relay, with their signed reach addresses that
    /// another host can be reached at (`HostPort.isRemoteUnicast`: no loopback, unspecified,
    /// multicast or broadcast address, which a member could sign to aim dials at a host's own services).
    var relayedReach: [MemberID: [String]] {
        var out: [MemberID: [String]] = [:]
        for peer in relayedLinks.keys where isLive(peer) { out[peer] = dialableReach(of: peer) }
        return out
    }

    /// `peer`'s signed reach addresses that punching may dial.
    func dialableReach(of peer: MemberID) -> [String] {
        (swim.members[peer]?.reach ?? []).filter(HostPort.isRemoteUnicast)
    }

    /// Attempts due (from `tick`).
    mutating func punchTick(now: Double) -> [SessionEffect] {
        punch.tick(relayed: relayedReach, own: swim.local.reach, now: now).map(Self.effect)
    }

    /// A `punch` step from `peer`.
    mutating func receivePunch(_ step: HolePunch.Step, attempt: UInt32, from peer: MemberID, now: Double) -> [SessionEffect] {
        let addresses = relayedLinks[peer] != nil && isLive(peer) ? dialableReach(of: peer) : nil
        return punch.receive(step, attempt: attempt, from: peer, peerAddresses: addresses, own: swim.local.reach, now: now).map(Self.effect)
    }

    private static func effect(_ action: HolePunch.Action) -> SessionEffect {
        switch action {
        case let .send(peer, attempt, step): .sendLink(peer, .punch(attempt: attempt, step: step))
        case let .dial(peer, addrs, initiator): .punchDial(peer: peer, addrs: addrs, initiator: initiator)
        }
    }
}
