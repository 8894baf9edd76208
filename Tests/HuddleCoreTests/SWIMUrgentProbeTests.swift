import Testing
@testable import HuddleCore

/// Probes every member once (t = 0.5, 1.0, …, acked at once) and returns the targets in order,
/// with `hook` run before each tick.
private func probeTargets(_ s: inout SWIMInstance, ticks: Int, from start: Double = 0, hook: (Int, inout SWIMInstance, Double) -> Void = { _, _, _ in }) -> [MemberID] {
    var targets: [MemberID] = []
    var t = start
    for i in 0..<ticks {
        t += 0.5
        hook(i, &s, t - 0.01)
        for ping in s.tick(now: t).pings {
            targets.append(ping.target)
            _ = s.receive(SWIMMessage(sender: ping.target, kind: .ack(seq: ping.seq)), from: ping.to, now: t + 0.001)
        }
    }
    return targets
}

@Test func swimHearingASuspicionProbesTheSuspectNextOutOfTurnAndKeepsTheRound() {
    var s = swimInstance(knowing: Array(2...9))
    let targets = probeTargets(&s, ticks: 10) { i, s, now in
        // Before the third probe, member 3 says 5 is suspect.
        if i == 2 { _ = s.receive(swimGossip(from: 3, [.suspect(swimID(5), incarnation: 0, from: swimID(3))]), from: "x", now: now) }
    }
    #expect(targets[2] == swimID(5))
    // 5 acked (and so refuted nothing here, but the probe was outside the round): the round of
    // the eight members still probes each of them once, one period later.
    let round = targets.enumerated().filter { $0.offset != 2 }.map(\.element)
    #expect(Set(round.prefix(8)).count == 8)
}

@Test func swimOwnSuspicionsManySuspectsAndFullyConfirmedOnesAreNotProbedOutOfTurn() throws {
    // Our own suspicion (a failed probe or a lost link) comes from our own probing: no extra probe.
    var own = swimInstance(knowing: Array(2...9))
    _ = own.linkLost(swimID(5), now: 0.1)
    #expect(own.urgentProbes.isEmpty)
    // Three suspects at once (more than `urgentProbeLimit`, as in a partition): the third is left
    // to the round-robin.
    var many = swimInstance(knowing: Array(2...9))
    for target: UInt64 in [4, 5, 6] {
        _ = many.receive(swimGossip(from: 3, [.suspect(swimID(target), incarnation: 0, from: swimID(3))]), from: "x", now: 0.1)
    }
    #expect(many.urgentProbes == [swimID(4), swimID(5)])
    // A suspicion with all k confirmations needs no more: its queued probe is skipped.
    var confirmed = swimInstance(knowing: Array(2...9))
    _ = confirmed.receive(swimGossip(from: 2, [.suspect(swimID(5), incarnation: 0, from: swimID(2))]), from: "x", now: 0.1)
    for claimer: UInt64 in [3, 4, 6] {
        _ = confirmed.receive(swimGossip(from: claimer, [.suspect(swimID(5), incarnation: 0, from: swimID(claimer))]), from: "x", now: 0.2)
    }
    #expect(try #require(confirmed.suspicions[swimID(5)]).confirmations == 3)
    #expect(confirmed.tick(now: 0.5).pings.allSatisfy { $0.target != swimID(5) })
}

@Test func swimAFailedOutOfTurnProbeConfirmsWithoutHurtingLocalHealth() throws {
    var s = swimInstance(knowing: Array(2...9))
    _ = s.receive(swimGossip(from: 3, [.suspect(swimID(5), incarnation: 0, from: swimID(3))]), from: "x", now: 0.45)
    let ping = try #require(s.tick(now: 0.5).pings.first)
    #expect(ping.target == swimID(5))
    // Nobody answers, helpers send no nack: an ordinary probe would raise the score by 3.
    _ = s.tick(now: 0.7)
    _ = s.tick(now: 0.9)
    #expect(s.awareness.score == 0)
    #expect(try #require(s.suspicions[swimID(5)]).suspecters == [swimID(3), swimID(1)])
}

@Test func swimARefutationGoesStraightToEachClaimerOncePerIncarnation() {
    var a = swimInstance(1, knowing: [2, 3, 4, 5])
    let first = a.receive(swimGossip(from: 4, [.suspect(swimID(1), incarnation: 0, from: swimID(2))]), from: swimInfo(4).addr, now: 1)
    #expect(a.local.incarnation == 1)
    #expect(first.sent.map(\.to) == [swimInfo(2).addr])
    #expect(first.sent.first?.message.gossip == [.alive(a.local)])
    // Stale claims: a new claimer (3) is told once; the one told already (2) is not told again by
    // us directly (the stale-claim correction still answers whoever sent the datagram).
    let stale = a.receive(swimGossip(from: 5, [.suspect(swimID(1), incarnation: 0, from: swimID(3)),
                                              .suspect(swimID(1), incarnation: 0, from: swimID(2))]), from: swimInfo(5).addr, now: 1.1)
    #expect(stale.sent.map(\.to).sorted() == [swimInfo(3).addr, swimInfo(5).addr])
    #expect(a.receive(swimGossip(from: 5, [.suspect(swimID(1), incarnation: 0, from: swimID(3))]), from: swimInfo(5).addr, now: 1.2)
        .sent.map(\.to) == [swimInfo(5).addr])
    // Claims by an unknown member, or by ourselves, send nothing to them.
    #expect(a.receive(swimGossip(from: 5, [.suspect(swimID(1), incarnation: 0, from: swimID(77))]), from: "y", now: 1.3)
        .sent.allSatisfy { $0.to == "y" })
}
