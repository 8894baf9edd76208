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
    let linked = r.offered(m(3), via: m(2), linked: true, live: true, direct: true)
    let notLive = r.offered(m(3), via: m(2), linked: false, live: false, direct: true)
    let relayed = r.offered(m(3), via: m(2), linked: false, live: true, direct: false)
    let itself = r.offered(m(1), via: m(2), linked: false, live: true, direct: true)
    #expect(!linked, "already linked")
    #expect(!notLive, "not a live member")
    #expect(!relayed, "the relay is itself relayed")
    #expect(!itself, "itself")
    let taken = r.offered(m(3), via: m(2), linked: false, live: true, direct: true)
    #expect(taken)
    #expect(r.circuits[m(3)] == .open(via: m(2), initiator: false))
    r.refused(m(3), via: m(2), now: 0.5)
    #expect(r.via(m(3)) == m(2), "a refusal (of a duplicate request) leaves an open circuit open")
    let second = r.offered(m(3), via: m(4), linked: false, live: true, direct: true)
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
