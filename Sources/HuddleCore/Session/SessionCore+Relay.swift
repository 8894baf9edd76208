/// Relaying through a member (issue 36, item 2): this member as a relay (`RelayCircuits`) and as an
/// end of circuits (`RelayRoutes`); the link messages `circuit…` carry both.
///
/// Guarantees:
/// - a relay forwards a circuit's bytes only between the circuit's two ends, within its budget: a
///   member over it is paced (the shell stops reading its link while `relay.readPause` says so),
///   and only bytes past that (a burst of debt, twice the queue) are refused, which closes the
///   circuit at both ends; a refused request is answered
///   with `circuitRefuse` and counted (`relay.refusals`); a relay's link closing closes its circuits;
/// - the relay only moves `circuitData` bytes: the link over a circuit is an ordinary link whose
///   handshake and keys belong to its two ends (the shell runs it over the circuit's bytes);
/// - an end hands the shell bytes only from the relay of its open circuit with that peer, and a
///   link over a circuit is admitted only for the peer and relay of an open circuit;
/// - while a member's link runs over a relay, its `path` is `relayed` (`via` the relay) and SWIM
///   messages to it go over that link instead of datagrams (which its NAT may not let through);
///   so do SWIM messages to a member whose direct link comes from another host than its
///   advertised address (`linkTranslated`: a NATted member this one cannot probe by datagram).
extension SessionCore {
    /// Most link messages' worth of circuit requests one tick sends (the rest wait for later ticks).
    static let circuitRequestsPerTick = 8

    /// `--relay-limit` / `--no-relay`: how much this member relays (set before any link is up).
    public mutating func setRelayBudget(_ budget: RelayCircuits.Budget) {
        relay = RelayCircuits(local: local, budget: budget)
    }

    /// The relay of `member`'s link when it runs over a circuit (nil: direct, or no link).
    public func via(_ member: MemberID) -> MemberID? { relayedLinks[member] }

    /// Circuit requests due and idle circuits to close (from `tick`).
    mutating func relayTick(now: Double) -> [SessionEffect] {
        var out: [SessionEffect] = []
        // With every live member linked (a full mesh) and no circuit work left, `routes.tick` has
        // nothing to do and is not run (the members come from `linkView`, not a scan per tick).
        let view = linkView()
        if !view.unlinkedLive.isEmpty || !routes.isIdle {
            // Locals, not `self`, in the closure: a closure over a `mutating` method's `self` that
            // calls a method on it copied the whole core for every member.
            // The relays are looked at only for unlinked members.
            let relayed = relayedLinks
            let direct = view.unlinkedLive.isEmpty ? [] : Set(view.linkedLive.lazy.filter { relayed[$0] == nil })
            for request in routes.tick(unlinked: view.unlinkedLive, relays: direct, now: now, limit: Self.circuitRequestsPerTick) {
                out.append(.sendLink(request.via, .circuitRequest(peer: request.peer)))
            }
        }
        for pair in relay.tick(now: now) {
            out.append(.sendLink(pair.low, .circuitClose(peer: pair.high)))
            out.append(.sendLink(pair.high, .circuitClose(peer: pair.low)))
        }
        return out + relayStalls(now: now)
    }

    /// Relayed links gone quiet: a keepalive (a time request, which any live peer answers) after
    /// `RelayRoutes.Settings.keepalive`; after `stallAfter` the link is stalled — its relay drops or
    /// holds what it forwards — so its circuit is closed at the relay and here (the link over it
    /// ends), and the relay is not asked for that peer again at once (`RelayRoutes`).
    mutating func relayStalls(now: Double) -> [SessionEffect] {
        let (quiet, stalled) = routes.silence(relayed: relayedLinks, now: now)
        var out = timing.requests(to: quiet, wall: wallClock(now), now: now, force: true).map { SessionEffect.sendLink($0.0, $0.1) }
        for s in stalled { out += [.sendLink(s.via, .circuitClose(peer: s.peer)), .circuitDown(peer: s.peer, via: s.via)] }
        return out
    }

    /// A `circuit…` link message from `sender` (a member linked to this one). `queued`: bytes
    /// waiting on this member's link to a member (a relay forwards nothing more to one with
    /// twice `RelayCircuits.Budget.queueBytes` waiting; from once that, it pauses the sender).
    mutating func receiveCircuit(_ message: LinkMessage, from sender: MemberID, queued: (MemberID) -> Int, now: Double) -> [SessionEffect] {
        switch message {
        case let .circuitRequest(peer):
            // This member relays only between members it holds direct links to.
            if let refusal = relay.open(from: sender, to: peer, now: now) {
                return [.sendLink(sender, .circuitRefuse(peer: peer, reason: refusal.rawValue))]
            }
            return [.sendLink(peer, .circuitOffer(peer: sender))]
        case let .circuitOffer(peer):
            let direct = planner.linked.contains(sender) && relayedLinks[sender] == nil
            // From a member not heard of yet (news of it has not reached this one): refused, and
            // its record asked of the relay, which links to it; its next request is taken.
            if swim.members[peer] == nil, direct {
                return [.sendLink(sender, .circuitRefuse(peer: peer, reason: "not_taken"))] + catchUpMembership(from: sender, now: now)
            }
            guard routes.offered(peer, via: sender, linked: planner.linked.contains(peer), live: isLive(peer), direct: direct, now: now) else {
                return [.sendLink(sender, .circuitRefuse(peer: peer, reason: "not_taken"))]
            }
            return [.sendLink(sender, .circuitAccept(peer: peer)), .circuitUp(peer: peer, via: sender, initiator: false)]
        case let .circuitAccept(peer):
            if routes.accepted(peer, via: sender) { return [.circuitUp(peer: peer, via: sender, initiator: true)] }
            return relay.accept(from: sender, to: peer) ? [.sendLink(peer, .circuitAccept(peer: sender))] : []
        case let .circuitRefuse(peer, reason):
            if routes.circuits[peer]?.via == sender {
                routes.refused(peer, via: sender, now: now)
                return []
            }
            return relay.close(sender, peer) ? [.sendLink(peer, .circuitRefuse(peer: sender, reason: reason))] : []
        case let .circuitClose(peer):
            if routes.circuits[peer]?.via == sender {
                return routes.closed(peer, via: sender, now: now) ? [.circuitDown(peer: peer, via: sender)] : []
            }
            return relay.close(sender, peer) ? [.sendLink(peer, .circuitClose(peer: sender))] : []
        case let .circuitData(peer, bytes):
            if routes.via(peer) == sender { return [.circuitBytes(peer: peer, via: sender, bytes)] }
            switch relay.forward(bytes.count, from: sender, to: peer, queued: queued(peer), now: now) {
            case let .success(to): return [.sendLink(to, .circuitData(peer: sender, bytes: bytes))]
            case .failure(let refused) where refused.code == .relayRefused(.noCircuit): return []  // in flight past a close
            case .failure:
                _ = relay.close(sender, peer)
                return [.sendLink(sender, .circuitClose(peer: peer)), .sendLink(peer, .circuitClose(peer: sender))]
            }
        default:
            return []
        }
    }

    /// The shell's end of the circuit to `peer` through `via` ended (the link over it closed, or
    /// its handshake failed): the relay is told, and another is tried later.
    public mutating func circuitEnded(_ peer: MemberID, via: MemberID, now: Double) -> [SessionEffect] {
        routes.closed(peer, via: via, now: now) ? [.sendLink(via, .circuitClose(peer: peer))] : []
    }

    /// Whether a link over the circuit through `via` may serve as the link to `peer`: the circuit
    /// is open, to that peer, and no other link to it is up.
    public func admitsRelayedLink(_ peer: MemberID, via: MemberID) -> Bool {
        routes.via(peer) == via && !planner.linked.contains(peer)
    }

    /// A link came up (`linkUp`): the relay may use a direct one; a relayed one sets the path.
    mutating func relayLinkUp(_ peer: MemberID, via: MemberID?) {
        relayedLinks[peer] = via
        punch.linkUp(peer, direct: via == nil)
        if via == nil { relay.linkUp(peer) }
    }

    /// A link closed (`linkDown`): circuits through it close at both ends.
    mutating func relayLinkDown(_ peer: MemberID, now: Double) -> [SessionEffect] {
        relayedLinks[peer] = nil
        var out: [SessionEffect] = relay.linkDown(peer).map { .sendLink($0, .circuitClose(peer: peer)) }
        out += routes.linkDown(peer, now: now).map { .circuitDown(peer: $0, via: peer) }
        return out
    }

    /// Whether `member`'s direct link comes from another host than the address it advertises (as
    /// this member's socket sees it): a NAT in between, so datagrams to that address may never arrive.
    func linkTranslated(_ member: MemberID) -> Bool {
        guard planner.linked.contains(member), let seen = reach.seen[member]?.link, let addr = swim.members[member]?.addr,
              seen != addr, let from = HostPort.numeric(seen), let advertised = HostPort.numeric(addr) else { return false }
        return from.host != advertised.host
    }

    /// The path event of a link over a relay that came up (a relayed link reports no addresses).
    public func relayedPathEvent(_ peer: MemberID) -> [SessionEffect] {
        guard let info = swim.members[peer], isLive(peer) else { return [] }
        return [.member(.path, info)]
    }
}
