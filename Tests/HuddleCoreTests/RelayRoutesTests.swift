import Testing
@testable import HuddleCore

/// An end's rules for circuits (issue 36, item 2): when to ask, which relay, which offers to take.
private func m(_ raw: UInt64) -> MemberID { MemberID(raw: raw) }
/// Routes of member `raw` with a 3 s direct grace and 2 s more for the higher id.
private func routes(_ raw: UInt64) -> RelayRoutes {
    var r = RelayRoutes(local: m(raw))
    r.settings.directGrace = 3
    r.settings.higherIdDelay = 2
    return r
}

@Test func aCircuitIsAskedForOnlyAfterTheDirectGraceAndTheHigherIdWaitsLonger() {
    var low = routes(1), high = routes(3)
    #expect(low.tick(unlinked: [m(3)], relays: [m(2)], now: 0).isEmpty, "the direct dials go first")
    #expect(high.tick(unlinked: [m(1)], relays: [m(2)], now: 0).isEmpty)
    #expect(low.tick(unlinked: [m(3)], relays: [m(2)], now: 2.9).isEmpty)
    #expect(low.tick(unlinked: [m(3)], relays: [m(2)], now: 3) == [.init(peer: m(3), via: m(2))])
    #expect(high.tick(unlinked: [m(1)], relays: [m(2)], now: 3).isEmpty, "the higher id waits for the lower one's circuit")
    #expect(high.tick(unlinked: [m(1)], relays: [m(2)], now: 5) == [.init(peer: m(1), via: m(2))])
    #expect(low.tick(unlinked: [m(3)], relays: [m(2)], now: 4).isEmpty, "one request per peer at a time")
    // A member linked in the meantime is not asked for; unlinked again, its grace starts over.
    var r = routes(1)
    _ = r.tick(unlinked: [m(3)], relays: [m(2)], now: 0)
    _ = r.tick(unlinked: [], relays: [m(2)], now: 2)
    #expect(r.tick(unlinked: [m(3)], relays: [m(2)], now: 4).isEmpty)
    #expect(r.tick(unlinked: [m(3)], relays: [m(2)], now: 7).count == 1)
}

@Test func aRelayThatRefusesTimesOutOrClosesIsReplacedByAnother() {
    var r = routes(1)
    let relays: Set = [m(2), m(4)]
    _ = r.tick(unlinked: [m(9)], relays: relays, now: 0)
    #expect(r.tick(unlinked: [m(9)], relays: relays, now: 3) == [.init(peer: m(9), via: m(2))], "member order first")
    r.refused(m(9), via: m(4), now: 3.5)
    #expect(r.circuits[m(9)] == .requested(via: m(2), at: 3), "only the relay asked can refuse")
    r.refused(m(9), via: m(2), now: 3.5)
    #expect(r.circuits[m(9)] == nil)
    #expect(r.tick(unlinked: [m(9)], relays: relays, now: 3.6) == [.init(peer: m(9), via: m(4))], "the next relay")
    // Unanswered: dropped after the timeout; the first relay again (failed longest ago, past retryAfter).
    #expect(r.tick(unlinked: [m(9)], relays: relays, now: 8.7) == [.init(peer: m(9), via: m(2))])
    let fromOther = r.accepted(m(9), via: m(4))
    #expect(!fromOther, "an answer from a relay not asked is ignored")
    #expect(r.accepted(m(9), via: m(2)) && r.via(m(9)) == m(2))
    #expect(r.circuits[m(9)] == .open(via: m(2), initiator: true))
    // The relay's link closes: the circuit with it; another relay is asked next.
    #expect(r.linkDown(m(2), now: 10) == [m(9)] && r.via(m(9)) == nil)
    #expect(r.tick(unlinked: [m(9)], relays: [m(4)], now: 11) == [.init(peer: m(9), via: m(4))])
    // With every relay failed just now, nothing is asked until retryAfter has passed.
    var alone = routes(1)
    _ = alone.tick(unlinked: [m(9)], relays: [m(2)], now: 0)
    _ = alone.tick(unlinked: [m(9)], relays: [m(2)], now: 3)
    alone.closed(m(9), via: m(2), now: 3)
    #expect(alone.tick(unlinked: [m(9)], relays: [m(2)], now: 4).isEmpty)
    #expect(alone.tick(unlinked: [m(9)], relays: [m(2)], now: 5).count == 1)
    #expect(alone.tick(unlinked: [m(9)], relays: [m(9)], now: 20).isEmpty, "never the peer itself as its relay")
}

@Test func anOfferIsTakenOnlyFromALiveUnlinkedMemberThroughADirectLinkAndOnce() {
    var r = routes(1)
    let linked = r.offered(m(3), via: m(2), linked: true, live: true, direct: true, now: 0)
    let notLive = r.offered(m(3), via: m(2), linked: false, live: false, direct: true, now: 0)
    let relayed = r.offered(m(3), via: m(2), linked: false, live: true, direct: false, now: 0)
    let itself = r.offered(m(1), via: m(2), linked: false, live: true, direct: true, now: 0)
    #expect(!linked, "already linked")
    #expect(!notLive, "not a live member")
    #expect(!relayed, "the relay is itself relayed")
    #expect(!itself, "itself")
    let taken = r.offered(m(3), via: m(2), linked: false, live: true, direct: true, now: 0)
    #expect(taken)
    #expect(r.circuits[m(3)] == .open(via: m(2), initiator: false))
    r.refused(m(3), via: m(2), now: 0.5)
    #expect(r.via(m(3)) == m(2), "a refusal (of a duplicate request) leaves an open circuit open")
    let second = r.offered(m(3), via: m(4), linked: false, live: true, direct: true, now: 0)
    #expect(!second, "one open circuit per peer")
    let byOther = r.closed(m(3), via: m(4), now: 1)
    #expect(!byOther, "only its own relay closes it")
    #expect(r.closed(m(3), via: m(2), now: 1) && r.via(m(3)) == nil)
    r.forget(m(3))
    #expect(r.circuits.isEmpty)
}

/// Past the limit of requests per tick, a peer is not recorded as asked: it is asked at a later
/// tick, and its relay is never counted as failed for a request that was not sent.
@Test func requestsPastTheLimitOfATickAreAskedAtTheNextOne() {
    var r = routes(1)
    let peers = Set((10..<20).map { m($0) })
    _ = r.tick(unlinked: peers, relays: [m(2)], now: 0)
    let first = r.tick(unlinked: peers, relays: [m(2)], now: 3, limit: 8)
    #expect(first.count == 8)
    #expect(peers.filter { r.circuits[$0] != nil }.count == 8, "only the requests sent are recorded")
    let second = r.tick(unlinked: peers, relays: [m(2)], now: 3.1, limit: 8)
    #expect(Set((first + second).map(\.peer)) == peers, "the other two at the next tick")
}

/// Finding (a): an offer through another relay does not replace this member's pending request,
/// unless it comes from the lower id (whose circuit both ends keep); one through the relay asked
/// is taken (the two requests crossed there).
@Test func anUnsolicitedOfferDoesNotReplaceAPendingRequest() {
    var low = routes(1)
    _ = low.tick(unlinked: [m(9)], relays: [m(2), m(4)], now: 0)
    #expect(low.tick(unlinked: [m(9)], relays: [m(2), m(4)], now: 3) == [.init(peer: m(9), via: m(2))])
    let elsewhere = low.offered(m(9), via: m(4), linked: false, live: true, direct: true, now: 3.1)
    #expect(!elsewhere, "the lower id keeps its own request")
    #expect(low.circuits[m(9)] == .requested(via: m(2), at: 3))
    let crossed = low.offered(m(9), via: m(2), linked: false, live: true, direct: true, now: 3.2)
    #expect(crossed && low.circuits[m(9)] == .open(via: m(2), initiator: false), "through the relay it asked: taken")

    var high = routes(9)
    _ = high.tick(unlinked: [m(1)], relays: [m(2), m(4)], now: 0)
    #expect(high.tick(unlinked: [m(1)], relays: [m(2), m(4)], now: 5) == [.init(peer: m(1), via: m(2))])
    let fromLower = high.offered(m(1), via: m(4), linked: false, live: true, direct: true, now: 5.1)
    #expect(fromLower && high.via(m(1)) == m(4), "the lower id's circuit wins over the higher's request")
}

/// Item 6: an open circuit's link that goes quiet is sent a keepalive, and stalls after
/// `stallAfter`; its relay is then failed for the peer and not chosen again at once — not even
/// after the peer failed and came back (`forget`) — nor taken from an offer just after; the
/// failure is forgotten after `failureMemory`.
@Test func aRelayThatStalledIsNotChosenAgainAtOnceEvenWhenThePeerFailedMeanwhile() {
    var r = routes(1)
    let relays: Set = [m(2), m(4)]
    _ = r.tick(unlinked: [m(9)], relays: relays, now: 0)
    #expect(r.tick(unlinked: [m(9)], relays: relays, now: 3) == [.init(peer: m(9), via: m(2))])
    let accepted = r.accepted(m(9), via: m(2))
    #expect(accepted)
    // The link over it is up (watched from the first look) and heard from.
    #expect(r.silence(relayed: [m(9): m(2)], now: 4) == ([], []))
    r.heard(m(9), now: 5)
    #expect(r.silence(relayed: [m(9): m(2)], now: 5.5) == ([], []))
    #expect(r.silence(relayed: [m(9): m(2)], now: 6.1) == ([m(9)], []), "quiet for a second: a keepalive")
    r.heard(m(9), now: 6.2)
    let quiet = r.silence(relayed: [m(9): m(2)], now: 12.1)
    #expect(quiet.keepalive == [m(9)])
    let stalled = r.silence(relayed: [m(9): m(2)], now: 12.5)
    #expect(stalled.stalled == [.init(peer: m(9), via: m(2))] && r.stalls == 1, "six seconds of silence: stalled")
    #expect(r.circuits[m(9)] == nil)
    // The stall made the peer look failed; it comes back.
    r.forget(m(9))
    _ = r.tick(unlinked: [m(9)], relays: relays, now: 12.6)
    #expect(r.tick(unlinked: [m(9)], relays: relays, now: 15.7) == [.init(peer: m(9), via: m(4))], "the other relay, not the stalled one")
    var other = routes(9)
    _ = other.tick(unlinked: [], relays: [], now: 0)
    let first = other.offered(m(1), via: m(2), linked: false, live: true, direct: true, now: 0)
    #expect(first)
    #expect(other.silence(relayed: [m(1): m(2)], now: 0) == ([], []))
    _ = other.silence(relayed: [m(1): m(2)], now: 6)
    let reoffered = other.offered(m(1), via: m(2), linked: false, live: true, direct: true, now: 6.5)
    #expect(!reoffered, "an offer through the relay that just stalled is not taken")
    let later = other.offered(m(1), via: m(2), linked: false, live: true, direct: true, now: 7.5)
    #expect(later, "a while later it is")
    // Remembered for `failureMemory` only: then it is a fresh relay again.
    var alone = routes(1)
    _ = alone.tick(unlinked: [m(9)], relays: relays, now: 0)
    _ = alone.tick(unlinked: [m(9)], relays: relays, now: 3)
    alone.closed(m(9), via: m(2), now: 3)
    #expect(alone.failedRecently(m(9), via: m(2), within: 60, now: 62))
    _ = alone.tick(unlinked: [], relays: relays, now: 63.5)
    #expect(!alone.failedRecently(m(9), via: m(2), within: .infinity, now: 64), "forgotten after failureMemory")
}
