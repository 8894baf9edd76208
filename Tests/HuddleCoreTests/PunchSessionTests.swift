import HuddleCrypto
import Testing
@testable import HuddleCore

/// Hole punching in the session core (issue 36, item 3): A and B linked through R exchange the
/// three punch steps over their relayed link, each is told to dial the other's signed reach
/// addresses, and the direct link that comes up takes the relayed one's place.
private let a = MemberID(raw: 1), r = MemberID(raw: 2), b = MemberID(raw: 3)
private let identities = [a: Identity(seed: [UInt8](repeating: 1, count: 32)), r: Identity(seed: [UInt8](repeating: 2, count: 32)),
                          b: Identity(seed: [UInt8](repeating: 3, count: 32))]
/// Where R sees each one's datagrams come from: its listening port kept (an easy NAT), so it is the
/// reach address the member's own record offers (`SessionCore.reachAddresses`).
private let reach = [a: ["198.51.100.1:1"], r: [], b: ["198.51.100.3:1"]]

/// Member `id`'s signed record; `offers`: with its reach addresses (an easy NAT), else none (a hard one).
private func info(_ id: MemberID, offers: Bool = true) -> MemberInfo {
    MemberInfo(id: id, node: identities[id]!.publicKey, name: "\(id.raw)", addr: testAddr("m\(id.raw)"),
               reach: offers ? reach[id]! : []).signed(by: identities[id]!)
}

/// A and B, each knowing R and the other, linked to R directly and to each other through R.
private func pair(bOffers: Bool = true) -> [MemberID: SessionCore] {
    var cores: [MemberID: SessionCore] = [:]
    for id in [a, b] {
        var c = SessionCore(local: info(id, offers: id == a || bOffers), identity: identities[id]!, joining: false, swimSeed: id.raw, journalSeed: id.raw)
        let others = [r, id == a ? b : a].map { info($0, offers: $0 != b || bOffers) }
        _ = c.receivePushPull(SWIMPushPull(join: false, members: others), from: testAddr("m"), now: 0)
        _ = c.linkUp(r)
        // R reports the member's mapping: its record keeps offering it when it publishes.
        if id == a || bOffers { _ = c.receiveLink(.observed(link: "", datagram: reach[id]![0]), from: r, addr: info(r).addr, now: 0) }
        _ = c.linkUp(id == a ? b : a, via: r)
        cores[id] = c
    }
    return cores
}

@Test func aRelayedPairPunchesOverItsLinkAndTheDirectLinkTakesItsPlace() {
    var cores = pair()
    #expect(cores[a]!.tick(now: 1).contains(.sendLink(b, .punch(attempt: 1, step: .connect))), "the lower id starts, over the relayed link")
    #expect(cores[b]!.receiveLink(.punch(attempt: 1, step: .connect), from: a, addr: info(a).addr, now: 1.25) == [.sendLink(a, .punch(attempt: 1, step: .reply))])
    #expect(cores[a]!.receiveLink(.punch(attempt: 1, step: .reply), from: b, addr: info(b).addr, now: 1.5) == [.sendLink(b, .punch(attempt: 1, step: .sync))])
    #expect(cores[b]!.receiveLink(.punch(attempt: 1, step: .sync), from: a, addr: info(a).addr, now: 1.75)
        == [.punchDial(peer: a, addrs: reach[a]!, initiator: false)], "B dials A's signed reach address at the sync")
    #expect(cores[a]!.tick(now: 1.75).contains(.punchDial(peer: b, addrs: reach[b]!, initiator: true)), "A half a relayed round trip later")

    // The punched link comes up at both ends: the path is direct, and each counts a success.
    for (x, y) in [(a, b), (b, a)] {
        _ = cores[x]!.linkUp(y)
        #expect(cores[x]!.path(to: y) == .direct && cores[x]!.via(y) == nil)
        #expect(cores[x]!.punch.successes == 1 && cores[x]!.punch.attempts == 1)
    }
    // A punch step over a direct link is refused and counted.
    #expect(cores[b]!.receiveLink(.punch(attempt: 2, step: .connect), from: a, addr: info(a).addr, now: 3).isEmpty)
    #expect(cores[b]!.punch.refused == 1)
}

@Test func aMemberWhoseRecordOffersNoReachAddressIsNotPunchedTo() {
    var cores = pair(bOffers: false)
    for step in 1...40 {
        let now = Double(step) / 4
        #expect(!cores[a]!.tick(now: now).contains { if case .sendLink(_, .punch) = $0 { true } else { false } }, "nothing to dial at B: no attempt")
    }
    // Nor does B start one (the higher id never does), and nothing is dialed at either end.
    for step in 1...40 {
        #expect(!cores[b]!.tick(now: Double(step) / 4).contains { if case .punchDial = $0 { true } else { false } })
    }
    #expect(cores[a]!.punch.attempts == 0 && cores[b]!.punch.attempts == 0)
}
