import Testing
@testable import HuddleCore

@Test func swimLeaveIsGossipedAndReportedAsLeftNotFailed() throws {
    var a = swimInstance(1, knowing: [2, 3, 4])
    let out = a.leave(now: 5)
    #expect(a.hasLeft && a.local.incarnation == 1)
    let msg = try #require(out.sent.first)
    #expect(out.sent.count == 3)
    #expect(msg.message.gossip.contains(.left(swimID(1), incarnation: 1)))
    // After leaving: no probes, no answers.
    #expect(a.tick(now: 6).pings.isEmpty)
    #expect(a.receive(SWIMMessage(sender: swimID(2), kind: .ping(seq: 1, target: swimID(1))), from: "x", now: 6).isEmpty)
    #expect(a.leave(now: 7).isEmpty)

    var b = swimInstance(2, knowing: [1, 3, 4])
    #expect(b.receive(msg.message, from: swimInfo(1).addr, now: 5).emitted(about: 1) == [.left])
    #expect(b.members[swimID(1)]?.state == .left)
    #expect(b.liveCount == 3)
    // Left is final: a member id is one run of a node.
    var late = swimInfo(1); late.incarnation = 9
    #expect(b.receive(swimGossip(from: 3, [.alive(late), .failed(swimID(1), incarnation: 9, from: swimID(3))]), from: "x", now: 6).emitted.isEmpty)
    // And no re-merge attempts go to a member that left.
    #expect(b.tick(now: 100).pushPulls.filter { $0 == swimInfo(1).addr }.isEmpty)
}

@Test func swimAMemberThatLeftIsNeverProbed() {
    var b = swimInstance(2, knowing: [1])
    _ = b.receive(swimGossip(from: 1, [.left(swimID(1), incarnation: 1)]), from: "x", now: 0.1)
    var t = 0.2
    while t < 5 { #expect(b.tick(now: t).pings.isEmpty); t += 0.1 }
}
