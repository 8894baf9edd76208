import HuddleCrypto
import Testing
@testable import HuddleCore

/// Hole punching's rules (issue 36, item 3): who starts, when each end dials, what it dials,
/// retries and backoff, and the budget a hostile peer meets.
private func m(_ raw: UInt64) -> MemberID { MemberID(raw: raw) }
private let lowAddr = "198.51.100.1:7400", highAddr = "198.51.100.3:7400"

@Test func anAttemptIsStartedByTheLowerIdWhenItHasAnAddressToOffer() {
    var low = HolePunch(local: m(1)), high = HolePunch(local: m(3))
    #expect(low.tick(relayed: [m(3): [highAddr]], own: [], now: 0).isEmpty, "this member offers none: the peer could not reach it")
    #expect(low.tick(relayed: [m(3): [highAddr]], own: [lowAddr], now: 0) == [.send(m(3), attempt: 1, step: .connect)])
    #expect(low.tick(relayed: [m(3): [highAddr]], own: [lowAddr], now: 0.5).isEmpty, "one attempt at a time")
    #expect(high.tick(relayed: [m(1): [lowAddr]], own: [highAddr], now: 0).isEmpty, "the higher id never starts")
    // The peer's record offers nothing (a lone reporter's address is never signed): its reply may.
    var other = HolePunch(local: m(1))
    #expect(other.tick(relayed: [m(3): []], own: [lowAddr], now: 0) == [.send(m(3), attempt: 1, step: .connect)])
    #expect(other.receive(.reply, attempt: 1, from: m(3), peerAddresses: [], offered: [highAddr], own: [lowAddr], now: 0.2)
        == [.send(m(3), attempt: 1, step: .sync)])
    #expect(other.tick(relayed: [m(3): []], own: [lowAddr], now: 0.31) == [.dial(m(3), addrs: [highAddr], initiator: true)],
            "the address the peer's own reply offered")
    // A reply that offers nothing (and a record that offers nothing): no sync, no dial.
    var none = HolePunch(local: m(1))
    _ = none.tick(relayed: [m(3): []], own: [lowAddr], now: 0)
    #expect(none.receive(.reply, attempt: 1, from: m(3), peerAddresses: [], offered: [], own: [lowAddr], now: 0.2).isEmpty)
    #expect((0...40).allSatisfy { none.tick(relayed: [m(3): []], own: [lowAddr], now: 0.2 + Double($0) / 4).allSatisfy {
        if case .dial = $0 { false } else { true } } } && none.attempts == 0)
}

/// Issue 36's slow first punch: the starter's `connect` used to find the other end without an
/// address of its own yet (its reflexive address arrives a moment later), go unanswered, and the
/// pair waited out the attempt's timeout and the backoff (5 s) before the next one. Now the other
/// end answers it as soon as it has an address, so the pair dials about when the later of the two
/// learns its address.
@Test func aConnectThatComesBeforeTheOtherEndHasAnAddressIsAnsweredWhenOneAppears() {
    var low = HolePunch(local: m(1)), high = HolePunch(local: m(3))
    #expect(low.tick(relayed: [m(3): []], own: [lowAddr], now: 0) == [.send(m(3), attempt: 1, step: .connect)])
    #expect(high.receive(.connect, attempt: 1, from: m(1), peerAddresses: [], offered: [lowAddr], own: [], now: 0.1).isEmpty,
            "nothing to offer yet: no answer now")
    #expect(high.tick(relayed: [m(1): []], own: [], now: 0.5).isEmpty)
    // Its reflexive address arrives 1.4 s after the connect: the answer goes at once.
    #expect(high.tick(relayed: [m(1): []], own: [highAddr], now: 1.5) == [.send(m(1), attempt: 1, step: .reply)])
    #expect(high.tick(relayed: [m(1): []], own: [highAddr], now: 1.6).isEmpty, "answered once")
    #expect(low.receive(.reply, attempt: 1, from: m(3), peerAddresses: [], offered: [highAddr], own: [lowAddr], now: 1.6)
        == [.send(m(3), attempt: 1, step: .sync)])
    #expect(high.receive(.sync, attempt: 1, from: m(1), peerAddresses: [], own: [highAddr], now: 1.7) == [.dial(m(1), addrs: [lowAddr], initiator: false)])
    // The starter dials half the connect → reply time later: 2.4 s after its connect, not 5 s and more.
    #expect(low.tick(relayed: [m(3): []], own: [lowAddr], now: 2.41) == [.dial(m(3), addrs: [highAddr], initiator: true)])
    #expect(low.attempts == 1 && high.attempts == 1)

    // Too late (past `lateAnswer`): not answered; the starter's next attempt is.
    var late = HolePunch(local: m(3))
    _ = late.receive(.connect, attempt: 1, from: m(1), peerAddresses: [], offered: [lowAddr], own: [], now: 0)
    #expect(late.tick(relayed: [m(1): []], own: [highAddr], now: late.settings.lateAnswer + 0.5).isEmpty)
    // Nor is one whose pair is no longer relayed.
    var gone = HolePunch(local: m(3))
    _ = gone.receive(.connect, attempt: 1, from: m(1), peerAddresses: [], offered: [lowAddr], own: [], now: 0)
    _ = gone.tick(relayed: [:], own: [], now: 0.5)
    #expect(gone.tick(relayed: [m(1): []], own: [highAddr], now: 1).isEmpty)
}

@Test func theStarterDialsHalfARelayedRoundTripAfterSyncAndTheOtherAtSync() {
    var low = HolePunch(local: m(1)), high = HolePunch(local: m(3))
    let relayedAtLow = [m(3): [highAddr, "203.0.113.9:7400", "203.0.113.10:7400"]]
    #expect(low.tick(relayed: relayedAtLow, own: [lowAddr], now: 0) == [.send(m(3), attempt: 1, step: .connect)])
    #expect(high.receive(.connect, attempt: 1, from: m(1), peerAddresses: [lowAddr], own: [highAddr], now: 0.125) == [.send(m(1), attempt: 1, step: .reply)])
    // The reply came back 0.5 s after the connect left: the sync takes about 0.25 s to arrive.
    #expect(low.receive(.reply, attempt: 1, from: m(3), peerAddresses: [highAddr], own: [lowAddr], now: 0.5) == [.send(m(3), attempt: 1, step: .sync)])
    #expect(high.receive(.sync, attempt: 1, from: m(1), peerAddresses: [lowAddr], own: [highAddr], now: 0.75) == [.dial(m(1), addrs: [lowAddr], initiator: false)])
    #expect(low.nextDeadline == 0.75)
    #expect(low.tick(relayed: relayedAtLow, own: [lowAddr], now: 0.7).isEmpty)
    #expect(low.tick(relayed: relayedAtLow, own: [lowAddr], now: 0.75) == [.dial(m(3), addrs: [highAddr, "203.0.113.9:7400"], initiator: true)],
            "at most `candidates` of the peer's signed addresses")
    #expect(low.attempts == 1 && high.attempts == 1)
    // The direct link comes up at both ends: a success each; a relayed link is not one.
    low.linkUp(m(3), direct: false)
    #expect(low.successes == 0)
    low.linkUp(m(3), direct: true)
    high.linkUp(m(1), direct: true)
    #expect(low.successes == 1 && high.successes == 1)
    #expect(low.nextDeadline == .infinity && !low.inProgress(m(3)))
}

@Test func failedAttemptsBackOffStopAtTheLimitAndStartOverWhenAddressesChange() {
    var low = HolePunch(local: m(1))
    let relayed = [m(3): [highAddr]]
    var connects: [Double] = []
    for step in 0...400 {
        let now = Double(step) / 4
        for case let .send(_, _, step) in low.tick(relayed: relayed, own: [lowAddr], now: now) where step == .connect { connects.append(now) }
    }
    // Each attempt times out after 4 s; the next waits 1 s, then 2 s; three in all.
    #expect(connects == [0, 5, 11], "\(connects)")
    #expect(low.tick(relayed: [m(3): ["203.0.113.9:7400"]], own: [lowAddr], now: 200) == [.send(m(3), attempt: 4, step: .connect)],
            "the peer's addresses changed: tried again at once")
    var other = HolePunch(local: m(1))
    _ = other.tick(relayed: relayed, own: [lowAddr], now: 0)
    _ = other.tick(relayed: relayed, own: [lowAddr], now: 4)
    _ = other.tick(relayed: relayed, own: [lowAddr], now: 5)
    _ = other.tick(relayed: relayed, own: [lowAddr], now: 9)
    _ = other.tick(relayed: relayed, own: [lowAddr], now: 11)
    _ = other.tick(relayed: relayed, own: [lowAddr], now: 15)
    #expect(other.tick(relayed: relayed, own: ["198.51.100.1:7401"], now: 16).count == 1, "this member's own address changed: tried again")
    // A pair that is no longer relayed has no attempt out (nothing keeps the deadline in the past).
    _ = other.tick(relayed: [:], own: [lowAddr], now: 17)
    #expect(!other.inProgress(m(3)) && other.nextDeadline == .infinity)
}

@Test func punchStepsOutOfTurnOrOverALinkThatIsNotRelayedAreRefusedAndCounted() {
    var high = HolePunch(local: m(3)), low = HolePunch(local: m(1))
    #expect(high.receive(.connect, attempt: 1, from: m(1), peerAddresses: nil, own: [highAddr], now: 0).isEmpty, "the link is direct or gone")
    #expect(low.receive(.connect, attempt: 1, from: m(3), peerAddresses: [highAddr], own: [lowAddr], now: 0).isEmpty, "the higher id does not start")
    #expect(high.receive(.sync, attempt: 1, from: m(1), peerAddresses: [lowAddr], own: [highAddr], now: 0).isEmpty, "a sync without its connect")
    #expect(low.receive(.reply, attempt: 1, from: m(3), peerAddresses: [highAddr], own: [lowAddr], now: 0).isEmpty, "a reply to nothing asked")
    #expect(high.receive(.connect, attempt: 2, from: m(1), peerAddresses: [lowAddr], own: [highAddr], now: 1).count == 1)
    #expect(high.receive(.connect, attempt: 2, from: m(1), peerAddresses: [lowAddr], own: [highAddr], now: 5).isEmpty, "the same attempt again")
    #expect(high.receive(.connect, attempt: 3, from: m(1), peerAddresses: [lowAddr], own: [highAddr], now: 1.1).isEmpty, "too soon after the last answer")
    #expect(high.receive(.sync, attempt: 1, from: m(1), peerAddresses: [lowAddr], own: [highAddr], now: 5).isEmpty, "a sync of another attempt")
    #expect(high.refused + low.refused == 7 && high.attempts == 0 && low.attempts == 0)
}

/// An end whose own record offers no reach address (a `hard` NAT, a public member, no verdict yet)
/// answers no `connect`: a hostile lower-id member on a relayed link cannot make it dial the
/// addresses that member signed (the pair would not have been tried from this end either).
@Test func anEndThatOffersNoAddressAnswersNoConnectAndDialsNothing() {
    var high = HolePunch(local: m(3))
    #expect(high.receive(.connect, attempt: 1, from: m(1), peerAddresses: [lowAddr], own: [], now: 0).isEmpty)
    #expect(high.receive(.sync, attempt: 1, from: m(1), peerAddresses: [lowAddr], own: [], now: 0.1).isEmpty, "no sync is taken for an unanswered connect")
    for step in 0...20 { #expect(high.tick(relayed: [m(1): [lowAddr]], own: [], now: Double(step) / 4).isEmpty, "a hard NAT's end never answers") }
    #expect(high.attempts == 0)
}

@Test func aFloodOfPunchRequestsMakesAtMostTheBudgetOfDialsAndOnlyToTheSignedAddresses() {
    var high = HolePunch(local: m(3))
    let signed = [lowAddr, "198.51.100.2:7400", "192.0.2.1:80", "192.0.2.2:80"]
    var dials: [[String]] = []
    for i in 0..<200 {
        let now = Double(i)
        let attempt = UInt32(i + 1)
        for effect in high.receive(.connect, attempt: attempt, from: m(1), peerAddresses: signed, own: [highAddr], now: now)
            + high.receive(.sync, attempt: attempt, from: m(1), peerAddresses: signed, own: [highAddr], now: now + 0.1) {
            if case let .dial(_, addrs, _) = effect { dials.append(addrs) }
        }
    }
    // 4 at once, then one per 15 s: 4 + 199 / 15 = 17 in 200 s, whatever the peer sends.
    #expect(dials.count == 4 + 199 / 15, "\(dials.count) dials")
    #expect(dials.allSatisfy { $0 == Array(signed.prefix(2)) }, "only the first signed addresses, at most two")
    #expect(high.refused == 200 - dials.count, "every sync past the budget is refused and counted")
}

@Test func aDirectLinkReplacesARelayedOneAtBothEndsAndTwoAlikeKeepTheLowerDialers() {
    let (low, high) = (m(1), m(3))
    // Each end holds both links and decides alike: the direct one stays, whoever dialed which.
    for (relayedDialer, directDialer) in [(low, high), (high, low), (low, low), (high, high)] {
        #expect(LinkPlanner.keepsNewLink(newDialedBy: directDialer, existingDialedBy: relayedDialer, newRelayed: false, existingRelayed: true))
        #expect(!LinkPlanner.keepsNewLink(newDialedBy: relayedDialer, existingDialedBy: directDialer, newRelayed: true, existingRelayed: false))
    }
    #expect(LinkPlanner.keepsNewLink(newDialedBy: low, existingDialedBy: high) && !LinkPlanner.keepsNewLink(newDialedBy: high, existingDialedBy: low))
}

/// A reach address is signed by the member it belongs to, but its value is that member's word:
/// punching never dials a loopback, unspecified, multicast or broadcast address (on Linux a connect
/// to 0.0.0.0 reaches the dialing host's own services).
@Test func punchingDialsOnlyAddressesOfAnotherHost() {
    for addr in ["198.51.100.1:7400", "10.1.2.3:1", "[2001:db8::1]:7400"] { #expect(HostPort.isRemoteUnicast(addr), "\(addr)") }
    for addr in ["0.0.0.0:22", "127.0.0.1:7400", "127.9.9.9:1", "224.0.0.1:7400", "239.255.255.250:1900", "255.255.255.255:9",
                 "0.1.2.3:5", "[::]:22", "[::1]:7400", "[ff02::1]:7400", "localhost:7400", "10.1.2.3:0"] {
        #expect(!HostPort.isRemoteUnicast(addr), "\(addr)")
    }
}

/// Finding (e): a peer that fails (or refutes) and comes back starts with the dial budget it left,
/// not a fresh one; and all peers together get at most the node-wide budget.
@Test func theDialBudgetOutlivesForgetAndAllPeersShareANodeWideCap() {
    var high = HolePunch(local: m(3))
    func dialed(_ p: inout HolePunch, from peer: MemberID, attempt: UInt32, now: Double) -> Int {
        let effects = p.receive(.connect, attempt: attempt, from: peer, peerAddresses: [lowAddr], own: [highAddr], now: now)
            + p.receive(.sync, attempt: attempt, from: peer, peerAddresses: [lowAddr], own: [highAddr], now: now + 0.1)
        return effects.count { if case .dial = $0 { true } else { false } }
    }
    var dials = 0
    for i in 0..<10 {
        dials += dialed(&high, from: m(1), attempt: UInt32(i + 1), now: Double(i))
        high.forget(m(1))
    }
    // The pair's burst (4) and 10 s of refill at one per 15 s: forgetting gave nothing back.
    #expect(dials == 4, "\(dials) dials across ten forgets")

    // Many peers (each lower than this member, each with its own budget): the node's cap holds.
    var node = HolePunch(local: m(1000))
    var total = 0
    for peer in 1...100 { total += dialed(&node, from: m(UInt64(peer)), attempt: 1, now: 0) }
    #expect(total == Int(node.settings.nodeDialBurst), "\(total) dials from 100 peers at once")
    var later = 0
    for peer in 101...200 { later += dialed(&node, from: m(UInt64(peer)), attempt: 1, now: 10.5) }
    #expect(later == 5, "then one per nodeDialRefill (2 s): \(later) in 10.4 s")
    // Memory: forgotten peers' entries go once their budget is whole again.
    for peer in 1...200 { node.forget(m(UInt64(peer))) }
    _ = node.tick(relayed: [:], own: [highAddr], now: 10 + node.settings.dialBurst * node.settings.dialRefill)
    #expect(node.pairs.isEmpty)
}

/// A dial's token is taken when an end commits to the attempt: the starter at `connect`, the other
/// end at `reply`. An end whose node-wide budget is spent answers no `connect` until a token
/// refills (within `lateAnswer`), so the starter never dials alone into a NAT that will not open;
/// and a starter with no token left starts nothing.
@Test func anEndWithNoDialLeftAnswersOnlyOnceATokenRefillsAndTheStarterStartsNothing() {
    var high = HolePunch(local: m(1000))
    // Eight peers take the node's burst of dials (connect answered, then sync: a dial each).
    for peer in 1...Int(high.settings.nodeDialBurst) {
        #expect(high.receive(.connect, attempt: 1, from: m(UInt64(peer)), peerAddresses: [lowAddr], own: [highAddr], now: 0) == [.send(m(UInt64(peer)), attempt: 1, step: .reply)])
        #expect(high.receive(.sync, attempt: 1, from: m(UInt64(peer)), peerAddresses: [lowAddr], own: [highAddr], now: 0.1).count == 1)
    }
    // The ninth: no token, so no reply now (before, it was answered and its sync refused).
    #expect(high.receive(.connect, attempt: 1, from: m(500), peerAddresses: [lowAddr], own: [highAddr], now: 0.2).isEmpty)
    #expect(high.tick(relayed: [m(500): [lowAddr]], own: [highAddr], now: 1.0).isEmpty, "still no token at 1 s")
    // One refills per nodeDialRefill (2 s): answered then, and its sync dials without another token.
    #expect(high.tick(relayed: [m(500): [lowAddr]], own: [highAddr], now: 0.2 + high.settings.nodeDialRefill) == [.send(m(500), attempt: 1, step: .reply)])
    #expect(high.receive(.sync, attempt: 1, from: m(500), peerAddresses: [lowAddr], own: [highAddr], now: 2.3) == [.dial(m(500), addrs: [lowAddr], initiator: false)])
    #expect(high.attempts == Int(high.settings.nodeDialBurst) + 1)

    // The starter: its burst spent on attempts, the next pair gets no `connect` until a token refills.
    var low = HolePunch(local: m(1))
    let peers = (2...Int(low.settings.nodeDialBurst) + 2).map { m(UInt64($0)) }
    let relayed = Dictionary(uniqueKeysWithValues: peers.map { ($0, [highAddr]) })
    let connects = low.tick(relayed: relayed, own: [lowAddr], now: 0).count { if case .send(_, _, .connect) = $0 { true } else { false } }
    #expect(connects == Int(low.settings.nodeDialBurst), "\(connects) connects with \(peers.count) relayed peers")
}
