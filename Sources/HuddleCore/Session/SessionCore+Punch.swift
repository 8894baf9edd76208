/// Hole punching (issue 36, item 3): the rules of `HolePunch` fed with what this core knows — which
/// links run through a relay, the reach addresses in each member's signed record, and the
/// addresses this member offers in its own `punch` steps (`punchAddresses`).
///
/// Guarantees:
/// - a pair punches only over its relayed link, and each end dials only addresses the other end
///   gave itself — signed (`MemberInfo.reach`) or carried by its own `connect`/`reply` over the
///   pair's end-to-end link — that another host can be reached at, within `HolePunch`'s budgets
///   (a `punch` over a direct link, from a member that is not live, or out of turn is refused and
///   counted);
/// - an address only one reporter saw (`tentativeReach`) is offered in this member's punch steps
///   and never signed: it reaches only the relayed peers that punch with this member, never the
///   record everyone holds, until a second reporter confirms it (`reachAddresses`);
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

    /// The addresses this member offers a relayed peer in its `connect` and `reply`: its signed
    /// reach addresses, then its tentative one; at most `MemberInfo.maximumReach`.
    var punchAddresses: [String] {
        var out = swim.local.reach
        for addr in tentativeReach where !out.contains(addr) { out.append(addr) }
        return Array(out.prefix(MemberInfo.maximumReach))
    }

    /// Attempts due (from `tick`).
    mutating func punchTick(now: Double) -> [SessionEffect] {
        // No relayed link and no pair left to judge: nothing to do (and no addresses to work out).
        if relayedLinks.isEmpty && punch.isIdle { return [] }
        let own = punchAddresses
        return punch.tick(relayed: relayedReach, own: own, now: now).map { Self.sessionEffect($0, own: own) }
    }

    /// A `punch` step from `peer`, with the addresses it offers (`addrs`: only those another host
    /// can be reached at are kept).
    mutating func receivePunch(_ step: HolePunch.Step, attempt: UInt32, addrs: [String], from peer: MemberID, now: Double) -> [SessionEffect] {
        let addresses = relayedLinks[peer] != nil && isLive(peer) ? dialableReach(of: peer) : nil
        let own = punchAddresses
        return punch.receive(step, attempt: attempt, from: peer, peerAddresses: addresses, offered: addrs.filter(HostPort.isRemoteUnicast),
                             own: own, now: now).map { Self.sessionEffect($0, own: own) }
    }

    /// `own`: what this member's `connect` and `reply` offer (a `sync` offers nothing).
    private static func sessionEffect(_ effect: HolePunch.Effect, own: [String]) -> SessionEffect {
        switch effect {
        case let .send(peer, attempt, step): .sendLink(peer, .punch(attempt: attempt, step: step, addrs: step == .sync ? [] : own))
        case let .dial(peer, addrs, initiator): .punchDial(peer: peer, addrs: addrs, initiator: initiator)
        }
    }
}
