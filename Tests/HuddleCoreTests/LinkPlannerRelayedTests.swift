import Testing
@testable import HuddleCore

/// Found by the simulator (issue 36, `ReachSimulationTests`): a public member and a NATted one
/// whose relayed link came up before the NATted end's direct dial stayed relayed for good — the
/// planner stopped dialing a member as soon as any link to it was up. A relayed link is a
/// fallback: the member is still dialed directly, at once and then at doubling intervals.
@Test func aMemberLinkedThroughARelayIsStillDialedDirectlyWithBackoff() {
    let me = MemberID(raw: 5), peer = MemberID(raw: 2)
    var planner = LinkPlanner(local: me)
    #expect(planner.want(peer, addr: "10.0.0.2:7400", now: 0) == nil, "the lower id dials first")
    planner.linkUp(peer, relayed: true, now: 1)
    var dialedAt: [Double] = []
    for tick in 1...400 {
        let now = 1 + Double(tick) * 0.25
        if !planner.tick(now: now).isEmpty { dialedAt.append(now) }
    }
    #expect(dialedAt.first == 1.25, "dialed at the first tick after the relayed link came up: \(dialedAt)")
    let gaps = zip(dialedAt.dropFirst(), dialedAt).map { $0 - $1 }
    #expect(gaps.prefix(5) == [2, 4, 8, 16, 32], "the waits double: \(gaps)")
    #expect(gaps.allSatisfy { $0 <= planner.relayedRedialMaximum }, "\(gaps)")

    // Direct: no more dials. Down: dialed as any unlinked member again.
    planner.linkUp(peer, relayed: false, now: 200)
    #expect((0..<100).allSatisfy { planner.tick(now: 200 + Double($0)).isEmpty })
    planner.linkDown(peer)
    #expect(planner.tick(now: 400) == [LinkPlanner.Dial(member: peer, addr: "10.0.0.2:7400")])
}

/// A direct link stops the dials.
@Test func aMemberLinkedDirectlyIsNotDialed() {
    var planner = LinkPlanner(local: MemberID(raw: 1))
    _ = planner.want(MemberID(raw: 9), addr: "10.0.0.9:7400", now: 0)
    planner.linkUp(MemberID(raw: 9), now: 0)
    #expect(planner.tick(now: 10).isEmpty, "a direct link: nothing to dial")
}
