import Testing
@testable import HuddleCore

@Test func swimAwarenessIsClampedAndScalesTimeouts() {
    var h = SWIMAwareness(max: 8)
    h.apply(-3)
    #expect(h.score == 0)
    h.apply(3)
    #expect(h.scale(0.5) == 2.0)
    h.apply(100)
    #expect(h.score == 7)
    #expect(h.scale(0.2) == 0.2 * 8)
}

/// Starts the first probe at t = 0.5 and returns its target.
private func firstProbe(_ s: inout SWIMInstance) throws -> (seq: UInt32, target: MemberID) {
    let ping = try #require(s.tick(now: 0.5).pings.first)
    return (ping.seq, ping.target)
}

@Test func swimAFailedProbeWithoutHelpersRaisesLocalHealthAndStretchesTheNextPeriod() throws {
    var s = swimInstance(knowing: [2])
    let p = try firstProbe(&s)
    #expect(!s.tick(now: 0.7).sent.contains { if case .pingReq = $0.message.kind { true } else { false } })  // no helper
    let out = s.tick(now: 1.0)                   // end of the period
    #expect(out.emitted(about: 2) == [.suspect])
    #expect(s.awareness.score == 1)
    // The next probe (same tick) waits twice as long.
    let next = try #require(s.probe)
    #expect(next.seq != p.seq)
    #expect(abs(next.timeoutAt - 1.4) < 1e-9 && abs(next.deadline - 2.0) < 1e-9)
}

@Test func swimMissedNacksRaiseLocalHealthByTheNumberMissed() throws {
    var s = swimInstance(knowing: [2, 3, 4, 5])
    let p = try firstProbe(&s)
    let reqs = s.tick(now: 0.7).sent.filter { if case .pingReq = $0.message.kind { true } else { false } }
    #expect(reqs.count == 3)
    #expect(!reqs.contains { $0.to == (s.members[p.target]?.addr ?? "") })
    _ = s.receive(SWIMMessage(sender: swimID(9), kind: .nack(seq: p.seq)), from: reqs[0].to, now: 0.9)
    _ = s.tick(now: 1.0)
    #expect(s.awareness.score == 2)              // 3 expected − 1 received
}

@Test func swimSuccessfulProbesLowerLocalHealth() throws {
    var s = swimInstance(knowing: [2, 3, 4, 5])
    s.awareness.apply(3)
    var t = 0.0
    for _ in 0..<3 {
        t += 5
        let ping = try #require(s.tick(now: t).pings.first)
        _ = s.receive(SWIMMessage(sender: ping.target, kind: .ack(seq: ping.seq)), from: ping.to, now: t + 0.01)
    }
    #expect(s.awareness.score == 0)
}

@Test func swimAProbeThatWasDueWhileWeWereStalledSaysNothingAboutTheTarget() throws {
    var s = swimInstance(knowing: [2, 3, 4, 5])
    let p = try firstProbe(&s)
    // Paused for 5 s: when we run again the answer was long due; no suspicion, but we are slow.
    let out = s.tick(now: 5.5)
    #expect(out.emitted(about: p.target.raw).isEmpty)
    #expect(s.awareness.score == 1)
}
