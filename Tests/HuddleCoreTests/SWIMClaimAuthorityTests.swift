import Testing
@testable import HuddleCore

// Authority per member (issue 33, item 3): another member's claim never fails a member here; only a
// live claimer's claims count; each claimer starts suspicions at a bounded rate.

/// Member `claimer`'s claim that `about` failed (or is suspect) at `incarnation`, as gossip.
private func failed(_ about: UInt64, by claimer: UInt64, incarnation: UInt64 = 0) -> SWIMMessage {
    swimGossip(from: claimer, [.failed(swimID(about), incarnation: incarnation, from: swimID(claimer))])
}

private func suspect(_ about: UInt64, by claimer: UInt64, incarnation: UInt64 = 0) -> SWIMMessage {
    swimGossip(from: claimer, [.suspect(swimID(about), incarnation: incarnation, from: swimID(claimer))])
}

@Test func anotherMembersFailedClaimOnlyStartsASuspicionTheMemberCanRefute() throws {
    var b = swimInstance(2, knowing: [1, 3, 4, 5])
    // Member 3 declares 1 failed: 1 becomes suspect here, with 3 as its first suspecter, and stays live.
    #expect(b.receive(failed(1, by: 3), from: swimInfo(3).addr, now: 1).emitted(about: 1) == [.suspect])
    #expect(b.members[swimID(1)]?.state == .suspect && b.liveCount == 5)
    #expect(b.suspicions[swimID(1)]?.suspecters == [swimID(3)])
    // The claim is passed on as it came (so 1 hears it and refutes); its record carries no claim
    // of its own (a `failed` signature is not a suspicion's).
    #expect(b.members[swimID(1)]?.claim == nil)
    // A second claimer's `failed` confirms the suspicion; it still does not fail 1.
    _ = b.receive(failed(1, by: 4), from: swimInfo(4).addr, now: 1.1)
    #expect(b.members[swimID(1)]?.state == .suspect && b.suspicions[swimID(1)]?.confirmations == 1)
    // 1 refutes: alive again.
    var refuted = swimInfo(1); refuted.incarnation = 1
    #expect(b.receive(swimGossip(from: 1, [.alive(refuted)]), from: swimInfo(1).addr, now: 1.2).emitted(about: 1) == [.alive])

    // An honest member's `failed` about a member that really crashed still converges: the claim
    // started this member's own timer, which fails the member when it runs out.
    #expect(b.receive(failed(5, by: 3), from: swimInfo(3).addr, now: 2).emitted(about: 5) == [.suspect])
    let deadline = try #require(b.suspicions[swimID(5)]?.deadline)
    #expect(deadline <= 2 + b.suspicionBounds.max)
    #expect(b.tick(now: deadline - 0.01).emitted(about: 5).isEmpty)
    #expect(b.tick(now: deadline).emitted(about: 5) == [.failed])
}

@Test func aClaimersFailedClaimsRepeatedAfterEachRefutationNeverFailTheMember() {
    var b = swimInstance(2, knowing: [1, 3, 4, 5])
    var t = 1.0
    var incarnation: UInt64 = 0
    var suspicions = 0
    // Mallory (3) claims 1 failed every 100 ms for 20 s, at whatever incarnation 1 holds; 1
    // refutes each claim b believes 50 ms later.
    while t < 21 {
        let out = b.receive(failed(1, by: 3, incarnation: incarnation), from: swimInfo(3).addr, now: t)
        #expect(!out.emitted(about: 1).contains(.failed))
        if b.members[swimID(1)]?.state == .suspect {
            suspicions += 1
            incarnation += 1
            var refuted = swimInfo(1); refuted.incarnation = incarnation
            _ = b.receive(swimGossip(from: 1, [.alive(refuted)]), from: swimInfo(1).addr, now: t + 0.05)
        }
        #expect(b.members[swimID(1)]?.state != .failed)
        t += 0.1
    }
    // One suspicion per maximum suspicion timeout at most; every other claim was refused.
    let gap = b.suspicionBounds.max
    #expect(suspicions >= 1 && suspicions <= Int(20 / gap) + 1, "\(suspicions) suspicions in 20 s (gap \(gap) s)")
    #expect(b.refusals[.claimRate] > 100)
}

@Test func aClaimFromAFailedOrLeftMemberCountsForNothing() throws {
    var left = swimInfo(3); left.state = .left; left.incarnation = 1
    var down = swimInfo(4); down.state = .failed
    var b = SWIMInstance(local: swimInfo(2), settings: .lan, seed: 7, signer: UncheckedMembershipSigner(),
                         members: [swimInfo(1), left, down, swimInfo(5)])
    for claimer: UInt64 in [3, 4] {
        #expect(b.receive(failed(1, by: claimer), from: "x:1", now: 1).emitted.isEmpty)
        #expect(b.receive(suspect(1, by: claimer), from: "x:1", now: 1).emitted.isEmpty)
        #expect(b.members[swimID(1)]?.state == .alive && b.suspicions.isEmpty)
    }
    #expect(b.refusals[.claimerNotLive] == 4)
    // Nor does it confirm a suspicion a live member started.
    _ = b.receive(suspect(1, by: 5), from: "x:1", now: 2)
    _ = b.receive(failed(1, by: 4), from: "x:1", now: 2)
    #expect(b.suspicions[swimID(1)]?.confirmations == 0)
    // A push-pull carrying its claim is not passed on to the member either.
    var claimed = swimInfo(5); claimed.state = .failed; claimed.claim = MemberClaim(from: swimID(4), signature: [])
    #expect(b.receivePushPull([claimed], join: false, from: "x:1", now: 3).sent.isEmpty)
    // A claim about this member is still refuted (the claimer may be live elsewhere).
    var one = SWIMInstance(local: swimInfo(1), settings: .lan, seed: 7, signer: UncheckedMembershipSigner(), members: [swimInfo(2), left])
    _ = one.receive(failed(1, by: 3), from: "x:1", now: 1)
    #expect(one.local.incarnation == 1)
}

@Test func eachClaimerStartsAtMostItsRateOfSuspicions() {
    var settings = SWIMSettings.lan
    settings.claimSuspicionsPerWindow = 4
    settings.claimWindow = 10
    var b = swimInstance(2, knowing: Array(3...30), settings: settings)
    // Claimer 3 suspects ten members at once: four suspicions start, six are refused.
    for n: UInt64 in 10...19 { _ = b.receive(suspect(n, by: 3), from: "x:1", now: 1) }
    #expect(b.suspicions.count == 4 && b.refusals[.claimRate] == 6)
    // Another claimer has its own budget, and confirmations of running suspicions are not limited.
    for n: UInt64 in 10...19 { _ = b.receive(failed(n, by: 4), from: "x:1", now: 1.5) }
    #expect(b.suspicions.count == 8)
    #expect(b.suspicions.values.filter { $0.confirmations == 1 }.count == 4)
    // This member's own suspicions (a link lost, a probe) are never limited.
    for n: UInt64 in 20...29 { _ = b.linkLost(swimID(n), now: 2) }
    #expect(b.suspicions.count == 18)
    // A window later, claimer 3 may start suspicions again.
    _ = b.receive(suspect(30, by: 3), from: "x:1", now: 11.5)
    #expect(b.members[swimID(30)]?.state == .suspect)
}

@Test func claimLimitsCountPerSubjectAndPerWindow() {
    var limits = SWIMClaimLimits()
    let (c, x, y) = (swimID(1), swimID(2), swimID(3))
    func admit(_ subject: MemberID, _ now: Double) -> Bool {
        limits.admit(claimer: c, subject: subject, now: now, window: 10, perWindow: 2, subjectGap: 7.5)
    }
    #expect(admit(x, 0))
    #expect(!admit(x, 7), "the same subject within the gap")
    #expect(admit(y, 7))
    #expect(!admit(swimID(4), 8), "the window's budget is spent")
    #expect(admit(x, 10.5), "past the gap and the window")
    limits.forget(c)
    limits.forget(y)
    #expect(admit(y, 10.6), "a forgotten claimer (and subject) starts afresh")
    // Another claimer may not start a suspicion of a subject within its gap either.
    func admitOther(_ now: Double) -> Bool {
        limits.admit(claimer: swimID(9), subject: x, now: now, window: 10, perWindow: 2, subjectGap: 7.5)
    }
    #expect(!admitOther(11))
    #expect(admitOther(18.1))
}

@Test func aStreamOfClaimsAboutThisMemberIsRefutedButSlowsItDownOnce() {
    var a = swimInstance(1, knowing: [2, 3, 4, 5])
    // Mallory (3) claims a failed 50 times in a second, each at a's incarnation of the moment.
    for k in 0..<50 { _ = a.receive(failed(1, by: 3, incarnation: a.local.incarnation), from: "x:1", now: 1 + Double(k) * 0.02) }
    #expect(a.local.incarnation == 50, "every claim is refuted")
    #expect(a.awareness.score == 1, "only the first within mallory's rate counts as a hint that a is slow")
    // Another member's claim within the same gap is refuted too, and is no second hint (mallory's
    // puppets would each be one); past the gap it counts.
    _ = a.receive(suspect(1, by: 4, incarnation: a.local.incarnation), from: "x:1", now: 2)
    #expect(a.local.incarnation == 51 && a.awareness.score == 1)
    _ = a.receive(suspect(1, by: 4, incarnation: a.local.incarnation), from: "x:1", now: 1 + a.suspicionBounds.max)
    #expect(a.local.incarnation == 52 && a.awareness.score == 2)
}

/// Puppets taking turns (issue 33): ten members a hostile member runs each claim that member 1 is
/// suspect, one after another, each right after 1 refuted the last. One suspicion starts per
/// maximum suspicion timeout, whoever claims; the others are refused (`claim_rate`). Before, each
/// claimer had its own budget, so ten puppets made 1 suspect, and refute, ten times a second.
@Test func puppetsTakingTurnsStartOneSuspicionOfAMemberPerGap() {
    var b = swimInstance(2, knowing: [1] + Array(3...13))
    let gap = b.suspicionBounds.max
    var incarnation: UInt64 = 0
    var started: [Double] = []
    func round(_ claimer: UInt64, at now: Double) {
        if b.receive(suspect(1, by: claimer, incarnation: incarnation), from: "x:1", now: now).emitted(about: 1) == [.suspect] { started.append(now) }
        incarnation += 1
        var refuted = swimInfo(1); refuted.incarnation = incarnation
        _ = b.receive(swimGossip(from: 1, [.alive(refuted)]), from: swimInfo(1).addr, now: now + 0.01)
    }
    for (k, claimer) in (UInt64(3)...12).enumerated() { round(claimer, at: 1 + Double(k) * 0.1) }
    #expect(started == [1], "suspicions started at \(started)")
    #expect(b.refusals[.claimRate] == 9)
    // Past the gap, a claim starts the next one; a claim about another member is not held back.
    round(13, at: 1 + gap)
    #expect(started == [1, 1 + gap])
    #expect(b.receive(suspect(5, by: 3), from: "x:1", now: 1 + gap).emitted(about: 5) == [.suspect])
}

/// Direct evidence beats hearsay: a suspicion only another member started, of a member this member
/// heard from itself over its link since, waits another timeout for the refutation instead of
/// failing the member here (in the 16-member simulation a hostile member's own `failed` claims,
/// each refuted, still failed an honest member at a peer that missed one refutation). A member
/// not heard from is failed by the timer as before, and so is one this member suspected itself.
@Test func aMemberHeardFromDirectlyIsNotFailedByASuspicionOnlyOthersStarted() throws {
    var b = swimInstance(2, knowing: [1, 3, 4, 5])
    _ = b.receive(failed(1, by: 3), from: swimInfo(3).addr, now: 1)
    _ = b.receive(failed(5, by: 3), from: swimInfo(3).addr, now: 1)
    let deadline = try #require(b.suspicions[swimID(1)]?.deadline)
    b.heard(from: swimID(1), now: 2)
    let out = b.tick(now: deadline)
    #expect(out.emitted(about: 1).isEmpty, "1 spoke to b after the claim: not failed on hearsay")
    #expect(b.members[swimID(1)]?.state == .suspect)
    #expect(out.emitted(about: 5) == [.failed], "5 was not heard from: failed by the timer")
    // Heard from before the claim only: no evidence against it.
    b.heard(from: swimID(4), now: 3)
    _ = b.receive(failed(4, by: 3), from: swimInfo(3).addr, now: deadline + 10)
    let later = try #require(b.suspicions[swimID(4)]?.deadline)
    #expect(b.tick(now: later).emitted(about: 4) == [.failed])
}
