import Testing
@testable import HuddleCore

@Test func swimASuspectedMemberRefutesWithAHigherIncarnationInItsAck() throws {
    var a = swimInstance(1, knowing: [2, 3, 4, 5])
    // Buddy system: the probe itself carries the suspicion.
    let ping = SWIMMessage(sender: swimID(2), kind: .ping(seq: 9, target: swimID(1)),
                           gossip: [.suspect(swimID(1), incarnation: 0, from: swimID(2))])
    let out = a.receive(ping, from: swimInfo(2).addr, now: 1)
    #expect(a.local.incarnation == 1)
    #expect(a.awareness.score == 1)  // being suspected hints that we are the slow one
    let ack = try #require(out.sent.first)
    #expect(ack.to == swimInfo(2).addr)
    #expect(ack.message.kind == .ack(seq: 9))
    var refuted = swimInfo(1); refuted.incarnation = 1
    #expect(ack.message.gossip.first == .alive(refuted))
    #expect(out.emitted.isEmpty)

    // The prober had it suspect; the refutation makes it alive again.
    var b = swimInstance(2, knowing: [1, 3, 4, 5])
    #expect(b.receive(swimGossip(from: 3, [.suspect(swimID(1), incarnation: 0, from: swimID(3))]), from: "x", now: 1).emitted(about: 1) == [.suspect])
    #expect(b.receive(ack.message, from: swimInfo(1).addr, now: 1.1).emitted(about: 1) == [.alive])
    #expect(b.members[swimID(1)]?.state == .alive)
    #expect(b.members[swimID(1)]?.incarnation == 1)
    #expect(b.suspicions[swimID(1)] == nil)
    // The old suspicion, heard again, no longer applies, and its sender is told the newer record.
    let stale = b.receive(swimGossip(from: 4, [.suspect(swimID(1), incarnation: 0, from: swimID(4))]), from: swimInfo(4).addr, now: 1.2)
    #expect(stale.emitted.isEmpty)
    #expect(stale.sent.contains { $0.to == swimInfo(4).addr && $0.message.gossip == [.alive(refuted)] })
}

@Test func swimAMemberDeclaredFailedRefutesAndIsAliveAgainElsewhere() throws {
    var a = swimInstance(1, knowing: [2, 3])
    _ = a.receive(swimGossip(from: 2, [.failed(swimID(1), incarnation: 0, from: swimID(2))]), from: "x", now: 1)
    #expect(a.local.incarnation == 1)
    #expect(a.local.state == .alive)

    var b = swimInstance(2, knowing: [1, 3])
    // Another member's `failed` only starts a suspicion here (issue 33); b's own timer fails the member.
    #expect(b.receive(swimGossip(from: 3, [.failed(swimID(1), incarnation: 0, from: swimID(3))]), from: "x", now: 1).emitted(about: 1) == [.suspect])
    let deadline = try #require(b.suspicions[swimID(1)]?.deadline)
    #expect(b.tick(now: deadline).emitted(about: 1) == [.failed])
    #expect(b.liveCount == 2)
    // Alive at the same incarnation does not undo a failure; a higher one (a refutation) does.
    #expect(b.receive(swimGossip(from: 1, [.alive(swimInfo(1))]), from: "x", now: deadline + 0.1).emitted.isEmpty)
    var refuted = swimInfo(1); refuted.incarnation = 1
    #expect(b.receive(swimGossip(from: 1, [.alive(refuted)]), from: "x", now: deadline + 0.2).emitted(about: 1) == [.alive])
    #expect(b.members[swimID(1)]?.state == .alive)
    #expect(b.liveCount == 3)
}

@Test func swimNameOrAddressChangesAreReportedAsUpdated() {
    var a = swimInstance(1, knowing: [2])
    _ = a.update(name: "renamed", now: 1)
    #expect(a.local.incarnation == 1)
    var b = swimInstance(2, knowing: [1])
    let out = b.receive(swimGossip(from: 1, [.alive(a.local)]), from: "x", now: 1)
    #expect(out.emitted.map(\.change) == [.updated])
    #expect(out.emitted.first?.info.name == "renamed")
    // A bare incarnation bump with the same metadata is silent.
    var bumped = a.local; bumped.incarnation = 2
    #expect(b.receive(swimGossip(from: 1, [.alive(bumped)]), from: "x", now: 2).emitted.isEmpty)
}

@Test func swimPushPullTeachesMembersAndRefutesClaimsAboutSelf() {
    var a = SWIMInstance(local: swimInfo(1), settings: .lan, seed: 1, signer: UncheckedMembershipSigner())
    // Claims travel with their claimer (member 2, learned first in the same state).
    var failedSelf = swimInfo(1); failedSelf.state = .failed; failedSelf.claim = MemberClaim(from: swimID(2), signature: [])
    var failedOther = swimInfo(9); failedOther.state = .failed; failedOther.claim = MemberClaim(from: swimID(2), signature: [])
    let out = a.receivePushPull([swimInfo(2), swimInfo(3), failedSelf, failedOther], join: true, from: "x", now: 0)
    #expect(out.emitted.map(\.change) == [.joined, .joined])
    #expect(a.local.incarnation == 1)            // refuted the failure claim
    #expect(a.members[swimID(9)] == nil)         // unknown failed members are not learned
    // A known member claimed failed at the same incarnation stays alive (our own probes judge it).
    var claim = swimInfo(2); claim.state = .failed; claim.claim = MemberClaim(from: swimID(3), signature: [])
    let told = a.receivePushPull([claim], join: false, from: "x", now: 1)
    #expect(told.emitted.isEmpty && a.members[swimID(2)]?.state == .alive)
    // ... but member 2 itself is told, so it refutes and the half that failed it takes it back.
    #expect(told.sent.count == 1 && told.sent.first?.to == swimInfo(2).addr)
    #expect(a.receivePushPull([claim], join: false, from: "x", now: 1.5).sent.isEmpty, "told once per claimRetell, however many push-pulls")
    #expect(a.receivePushPull([claim], join: false, from: "x", now: 3.0).sent.count == 1)
    var two = swimInstance(2, knowing: [1, 3])  // 3 is the claimer: 2 checks its claim
    let refuted = two.receive(told.sent[0].message, from: swimInfo(1).addr, now: 1)
    #expect(two.local.incarnation == 1 && refuted.isEmpty)
    // The far half (member 3) failed 2 by its own suspicion timer, started by 4's claim.
    var farHalf = swimInstance(3, knowing: [2, 4])
    _ = farHalf.receive(swimGossip(from: 4, [.failed(swimID(2), incarnation: 0, from: swimID(4))]), from: "x", now: 1)
    if let deadline = farHalf.suspicions[swimID(2)]?.deadline { _ = farHalf.tick(now: deadline) }
    #expect(farHalf.members[swimID(2)]?.state == .failed)
    _ = farHalf.receive(swimGossip(from: 2, [.alive(two.local)]), from: swimInfo(2).addr, now: 5)
    #expect(farHalf.members[swimID(2)]?.state == .alive)
    // At a higher incarnation the member's own newer record is taken; the claim on it is left to
    // our own probes (never an instant failure).
    claim.incarnation = 3
    #expect(a.receivePushPull([claim], join: false, from: "x", now: 2).emitted(about: 2).isEmpty)
    #expect(a.members[swimID(2)]?.incarnation == 3 && a.members[swimID(2)]?.state == .alive)
}
