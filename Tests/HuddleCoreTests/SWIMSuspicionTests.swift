import Testing
@testable import HuddleCore

@Test func swimSuspicionBoundsFollowLog10OfN() {
    var s = SWIMSettings.lan  // α 2, β 3, probe 0.5 s
    s.minSuspicionTimeout = 0
    let (min24, max24) = SWIMSuspicion.bounds(members: 24, settings: s)
    #expect(abs(min24 - 2 * 1.380211 * 0.5) < 1e-4)
    #expect(abs(max24 - 3 * min24) < 1e-9)
    // Below 10 members the scale is clamped to 1 (memberlist's nodeScale).
    #expect(SWIMSuspicion.bounds(members: 5, settings: s).min == 1.0)
    #expect(SWIMSuspicion.bounds(members: 0, settings: s).min == 1.0)
    #expect(abs(SWIMSuspicion.bounds(members: 1000, settings: s).min - 3.0) < 1e-9)
}

@Test func swimSuspicionMinimumNeverGoesBelowTheFloorThatLetsAPausedMemberRefute() {
    let s = SWIMSettings.lan  // floor 2.5 s
    #expect(SWIMSuspicion.bounds(members: 4, settings: s) == (2.5, 7.5))
    #expect(SWIMSuspicion.bounds(members: 24, settings: s) == (2.5, 7.5))
    // Where α × log10(N) × interval exceeds the floor, it rules.
    #expect(abs(SWIMSuspicion.bounds(members: 1000, settings: s).min - 3.0) < 1e-9)
}

@Test func swimSuspicionTimeoutShrinksLogarithmicallyWithConfirmations() {
    let t = { (n: Int) in SWIMSuspicion.timeout(confirmations: n, k: 3, min: 1, max: 6) }
    #expect(t(0) == 6)
    #expect(abs(t(1) - (6 - 5 * 0.5)) < 1e-9)           // log 2 / log 4 = 0.5
    #expect(t(1) > t(2) && t(2) > t(3))
    #expect(t(3) == 1)
    #expect(t(10) == 1)                                  // never below min
    #expect(SWIMSuspicion.timeout(confirmations: 0, k: 0, min: 1, max: 6) == 1)
}

@Test func swimSuspicionCountsEachSuspecterOnceAndAtMostK() {
    var s = SWIMSuspicion(from: swimID(2), k: 2, min: 1, max: 3, now: 10)
    #expect(s.deadline == 13)
    let results = [2, 3, 3, 4, 5].map { s.confirm(swimID($0)) }
    // The first suspecter is not a confirmation, repeats do not count, nor any beyond k.
    #expect(results == [false, true, false, true, false])
    #expect(s.confirmations == 2)
    #expect(s.deadline == 11)
}

/// The timeout formula without the pause floor (which would hide it at small N).
private let noFloor: SWIMSettings = {
    var s = SWIMSettings.lan
    s.minSuspicionTimeout = 0
    return s
}()

@Test func swimSuspectIsDeclaredFailedAtTheMaximumTimeoutWithoutConfirmations() throws {
    // N = 10: min = 2 × 1 × 0.5 = 1 s, max = 3 s.
    var s = swimInstance(knowing: Array(2...10), settings: noFloor)
    let out = s.receive(swimGossip(from: 3, [.suspect(swimID(5), incarnation: 0, from: swimID(3))]), from: "x", now: 10)
    #expect(out.emitted(about: 5) == [.suspect])
    let timer = try #require(s.suspicions[swimID(5)])
    #expect(timer.k == 3 && timer.min == 1 && timer.max == 3)
    #expect(s.tick(now: 12.9).emitted(about: 5).isEmpty)
    #expect(s.tick(now: 13.0).emitted(about: 5) == [.failed])
    #expect(s.members[swimID(5)]?.state == .failed)
    #expect(s.liveCount == 9)
}

@Test func swimIndependentConfirmationsShortenTheTimeoutToTheMinimum() throws {
    var s = swimInstance(knowing: Array(2...10), settings: noFloor)
    _ = s.receive(swimGossip(from: 3, [.suspect(swimID(5), incarnation: 0, from: swimID(3))]), from: "x", now: 10)
    let before = try #require(s.suspicions[swimID(5)]).deadline
    _ = s.receive(swimGossip(from: 4, [.suspect(swimID(5), incarnation: 0, from: swimID(4))]), from: "x", now: 10.1)
    let one = try #require(s.suspicions[swimID(5)]).deadline
    // A repeated suspecter changes nothing.
    _ = s.receive(swimGossip(from: 4, [.suspect(swimID(5), incarnation: 0, from: swimID(4))]), from: "x", now: 10.2)
    #expect(try #require(s.suspicions[swimID(5)]).deadline == one)
    _ = s.receive(swimGossip(from: 6, [.suspect(swimID(5), incarnation: 0, from: swimID(6))]), from: "x", now: 10.3)
    _ = s.receive(swimGossip(from: 7, [.suspect(swimID(5), incarnation: 0, from: swimID(7))]), from: "x", now: 10.4)
    let last = try #require(s.suspicions[swimID(5)]).deadline
    #expect(before == 13 && one < before && last == 11)
    #expect(s.tick(now: 11.0).emitted(about: 5) == [.failed])
}

@Test func swimSmallClustersUseTheMinimumTimeout() throws {
    // Three members: nobody could confirm (N − 2 < K), so k = 0 and the timeout is min = 1 s.
    var s = swimInstance(knowing: [2, 3], settings: noFloor)
    _ = s.receive(swimGossip(from: 2, [.suspect(swimID(3), incarnation: 0, from: swimID(2))]), from: "x", now: 5)
    #expect(try #require(s.suspicions[swimID(3)]).deadline == 6)
    // With the default floor, the same suspicion lasts 2.5 s: a 2 s pause is refuted in time.
    var d = swimInstance(knowing: [2, 3])
    _ = d.receive(swimGossip(from: 2, [.suspect(swimID(3), incarnation: 0, from: swimID(2))]), from: "x", now: 5)
    #expect(try #require(d.suspicions[swimID(3)]).deadline == 7.5)
}

@Test func swimStaleSuspicionsAreIgnored() {
    var s = swimInstance(knowing: [2, 3, 4])
    var newer = swimInfo(3); newer.incarnation = 4
    _ = s.receive(swimGossip(from: 3, [.alive(newer)]), from: "x", now: 1)
    let out = s.receive(swimGossip(from: 2, [.suspect(swimID(3), incarnation: 3, from: swimID(2))]), from: "x", now: 2)
    #expect(out.emitted.isEmpty)
    #expect(s.members[swimID(3)]?.state == .alive)
}

@Test func swimALostLinkSuspectsTheMemberAtOnceAsAFailedProbeWould() throws {
    var s = swimInstance(knowing: Array(2...10), settings: noFloor)
    let out = s.linkLost(swimID(5), now: 3)
    #expect(out.emitted(about: 5) == [.suspect])
    let timer = try #require(s.suspicions[swimID(5)])
    #expect(timer.suspecters == [swimID(1)] && timer.start == 3)
    // Our suspicion is gossiped, so the others count it as a confirmation.
    let gossip = s.tick(now: 3.1).sent.flatMap(\.message.gossip)
    #expect(gossip.contains(.suspect(swimID(5), incarnation: 0, from: swimID(1))))
    // Losing it again, or losing a link to ourselves, an unknown or a departed member, does nothing.
    #expect(s.linkLost(swimID(5), now: 3.2).isEmpty)
    #expect(s.linkLost(swimID(1), now: 3.2).isEmpty)
    #expect(s.linkLost(swimID(99), now: 3.2).isEmpty)
    _ = s.receive(swimGossip(from: 6, [.left(swimID(6), incarnation: 1)]), from: "x", now: 3.3)
    #expect(s.linkLost(swimID(6), now: 3.4).isEmpty)
    #expect(s.members[swimID(6)]?.state == .left)
}

@Test func swimALiveMemberWhoseLinkWasLostRefutesAndStaysAlive() {
    var s = swimInstance(knowing: Array(2...10), settings: noFloor)
    _ = s.linkLost(swimID(5), now: 3)
    var refuted = swimInfo(5); refuted.incarnation = 1
    let out = s.receive(swimGossip(from: 5, [.alive(refuted)]), from: "x", now: 3.2)
    #expect(out.emitted(about: 5) == [.alive])
    #expect(s.suspicions[swimID(5)] == nil)
    #expect(s.tick(now: 10).emitted(about: 5).isEmpty)
}
