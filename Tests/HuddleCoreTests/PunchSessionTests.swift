import HuddleCrypto
import Testing
@testable import HuddleCore

/// Hole punching in the session core (issue 36, item 3): A and B linked through R exchange the
/// three punch steps over their relayed link, each is told to dial the other's signed reach
/// addresses, and the direct link that comes up takes the relayed one's place.
private let a = MemberID(raw: 1), r = MemberID(raw: 2), b = MemberID(raw: 3)
private let identities = [a: Identity(seed: [UInt8](repeating: 1, count: 32)), r: Identity(seed: [UInt8](repeating: 2, count: 32)),
                          b: Identity(seed: [UInt8](repeating: 3, count: 32))]
/// Where R sees each one's datagrams come from: its listening port kept (an easy NAT). R is each
/// one's only reporter, so that address is only tentative (`SessionCore.tentativeReach`): offered
/// in the member's own punch steps, never signed into its record.
private let reach = [a: ["198.51.100.1:1"], r: [], b: ["198.51.100.3:1"]]

/// Member `id`'s signed record: no reach address (nothing any reporter confirmed).
private func info(_ id: MemberID) -> MemberInfo {
    MemberInfo(id: id, node: identities[id]!.publicKey, name: "\(id.raw)", addr: testAddr("m\(id.raw)"), reach: []).signed(by: identities[id]!)
}

/// A and B, each knowing R and the other, linked to R directly and to each other through R;
/// `bSeen`: R reported B's mapping (else B's NAT is not classified: it has nothing to offer).
private func pair(bSeen: Bool = true) -> [MemberID: SessionCore] {
    var cores: [MemberID: SessionCore] = [:]
    for id in [a, b] {
        var c = SessionCore(local: info(id), identity: identities[id]!, joining: false, swimSeed: id.raw, journalSeed: id.raw)
        _ = c.receivePushPull(SWIMPushPull(join: false, members: [r, id == a ? b : a].map { info($0) }), from: testAddr("m"), now: 0)
        _ = c.linkUp(r)
        if id == a || bSeen { _ = c.receiveLink(.observed(link: "", datagram: reach[id]![0]), from: r, addr: info(r).addr, now: 0) }
        _ = c.linkUp(id == a ? b : a, via: r)
        cores[id] = c
    }
    return cores
}

private func punches(_ effects: [SessionEffect]) -> [SessionEffect] {
    effects.filter { if case .sendLink(_, .punch) = $0 { true } else if case .punchDial = $0 { true } else { false } }
}

@Test func aRelayedPairPunchesWithTheAddressesItsEndsOfferAndTheDirectLinkTakesItsPlace() {
    var cores = pair()
    #expect(cores[a]!.reachAddresses.isEmpty && cores[a]!.tentativeReach == reach[a]!, "one reporter: tentative only")
    #expect(punches(cores[a]!.tick(now: 1)) == [.sendLink(b, .punch(attempt: 1, step: .connect, addrs: reach[a]!))],
            "the lower id starts over the relayed link, offering its tentative address")
    #expect(cores[a]!.swim.local.reach.isEmpty, "and does not sign it")
    #expect(cores[b]!.receiveLink(.punch(attempt: 1, step: .connect, addrs: reach[a]!), from: a, addr: info(a).addr, now: 1.25)
        == [.sendLink(a, .punch(attempt: 1, step: .reply, addrs: reach[b]!))])
    #expect(cores[a]!.receiveLink(.punch(attempt: 1, step: .reply, addrs: reach[b]!), from: b, addr: info(b).addr, now: 1.5)
        == [.sendLink(b, .punch(attempt: 1, step: .sync))])
    #expect(cores[b]!.receiveLink(.punch(attempt: 1, step: .sync), from: a, addr: info(a).addr, now: 1.75)
        == [.punchDial(peer: a, addrs: reach[a]!, initiator: false)], "B dials the address A's connect offered at the sync")
    #expect(punches(cores[a]!.tick(now: 1.75)) == [.punchDial(peer: b, addrs: reach[b]!, initiator: true)], "A half a relayed round trip later")

    // The punched link comes up at both ends: the path is direct, and each counts a success.
    for (x, y) in [(a, b), (b, a)] {
        _ = cores[x]!.linkUp(y)
        #expect(cores[x]!.path(to: y) == .direct && cores[x]!.via(y) == nil)
        #expect(cores[x]!.punch.successes == 1 && cores[x]!.punch.attempts == 1)
    }
    // B, now linked directly, sees A's datagrams come from the same mapping: a second reporter
    // confirms it, and A's record signs it.
    _ = cores[a]!.receiveLink(.observed(link: "", datagram: reach[a]![0]), from: b, addr: info(b).addr, now: 2)
    #expect(cores[a]!.reachAddresses == reach[a]! && cores[a]!.tentativeReach.isEmpty)
    _ = cores[a]!.tick(now: 3)
    #expect(cores[a]!.swim.local.reach == reach[a]!, "confirmed by two reporters: signed")
    // A punch step over a direct link is refused and counted.
    #expect(cores[b]!.receiveLink(.punch(attempt: 2, step: .connect, addrs: reach[a]!), from: a, addr: info(a).addr, now: 3).isEmpty)
    #expect(cores[b]!.punch.refused == 1)
}

@Test func aMemberWithNoAddressToOfferIsNeverDialed() {
    var cores = pair(bSeen: false)
    var connects = 0
    for step in 1...80 {
        let now = Double(step) / 4
        let out = punches(cores[a]!.tick(now: now))
        #expect(!out.contains { if case .punchDial = $0 { true } else { false } }, "nothing to dial at B")
        for case let .sendLink(_, .punch(attempt, .connect, addrs)) in out {
            connects += 1
            // B, with nothing to offer, does not answer.
            #expect(cores[b]!.receiveLink(.punch(attempt: attempt, step: .connect, addrs: addrs), from: a, addr: info(a).addr, now: now).isEmpty)
        }
    }
    #expect((1...cores[a]!.punch.settings.attempts).contains(connects), "tried, at most the attempts for one set of addresses: \(connects)")
    for step in 1...40 {
        #expect(!cores[b]!.tick(now: Double(step) / 4).contains { if case .punchDial = $0 { true } else { false } })
    }
    #expect(cores[a]!.punch.attempts == 0 && cores[b]!.punch.attempts == 0)
}

/// Issue 36, lone reach reporters: the only member that reports where this member's datagrams come
/// from (say the only public one, hostile) names an address of its choosing. It is never signed
/// into this member's record (so never gossiped to every member), only offered in this member's
/// own punch steps to a relayed peer; it stops being offered once another reporter disagrees, and
/// an address two reporters agree on is signed.
@Test func aLoneReportersAddressIsNeverSignedAndOnlyOfferedToAPunchingPeer() {
    var cores = pair()
    let victim = "192.0.2.66:1"
    _ = cores[a]!.receiveLink(.observed(link: "", datagram: victim), from: r, addr: info(r).addr, now: 1)
    var updates = 0
    for now in [1.25, 2.5, 3.0] {
        for case let .member(change, member) in cores[a]!.tick(now: now) where member.id == a && change == .updated { updates += 1 }
    }
    #expect(cores[a]!.swim.local.reach.isEmpty && updates == 0, "never signed, never gossiped")
    #expect(cores[a]!.tentativeReach == [victim] && cores[a]!.punchAddresses == [victim])
    // A second reporter sees another source: none is lone, none agreed; nothing is offered.
    let c = MemberID(raw: 4)
    let cInfo = MemberInfo(id: c, node: Identity(seed: [UInt8](repeating: 4, count: 32)).publicKey, name: "4", addr: testAddr("m4"))
        .signed(by: Identity(seed: [UInt8](repeating: 4, count: 32)))
    _ = cores[a]!.receivePushPull(SWIMPushPull(join: false, members: [cInfo]), from: testAddr("m"), now: 3.25)
    _ = cores[a]!.linkUp(c)
    _ = cores[a]!.receiveLink(.observed(link: "", datagram: reach[a]![0]), from: c, addr: cInfo.addr, now: 3.25)
    #expect(cores[a]!.punchAddresses.isEmpty && cores[a]!.reachAddresses.isEmpty)
    // R comes round to the truth: two agree, and it is signed.
    _ = cores[a]!.receiveLink(.observed(link: "", datagram: reach[a]![0]), from: r, addr: info(r).addr, now: 3.5)
    _ = cores[a]!.tick(now: 4.5)
    #expect(cores[a]!.swim.local.reach == reach[a]! && cores[a]!.punchAddresses == reach[a]!)
}
