import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 33, item 4: budgets a hostile member cannot game — a member that never acknowledges stops
/// pinning the store, and what one origin holds back is bounded in count and expires.
private let a = MemberID(raw: 1), b = MemberID(raw: 2), c = MemberID(raw: 3), x = MemberID(raw: 9)
private let identities = [a: Identity.generate(), b: Identity.generate(), c: Identity.generate(), x: Identity.generate()]

private func signed(_ m: WireMessage) -> SignedMessage {
    MessageBatch.sign([m], identity: identities[m.origin] ?? .generate())[0]
}

private func member(_ id: MemberID, knowing others: [MemberID], settings: CausalBroadcast.Settings) -> CausalBroadcast {
    var cb = CausalBroadcast(local: id, awaitingBaseline: false, settings: settings)
    for o in others { _ = cb.linkHello(origin: o, seq: 0) }
    _ = cb.setMembers(Set(others + [id]), now: 0)
    return cb
}

/// a streams 1 KiB broadcasts for 30 s; c acknowledges everything at once, b never does (its digests
/// say it delivered nothing). Before the fix b pinned every message: the store reached its limit and
/// a's sends waited (`isCongested`) for as long as b stayed.
@Test func aMemberThatNeverAcknowledgesStopsPinningTheStoreAfterTheAckDeadline() {
    var settings = CausalBroadcast.Settings()
    settings.storeLimitBytes = 256 << 10
    settings.retainBytes = 64 << 10
    var alice = member(a, knowing: [b, c], settings: settings)
    let silent = CausalBroadcast.Digest(delivered: [a: 0], storedFrom: [:])
    var congestedAfterDeadline = 0, congestedBefore = 0
    var now = 0.0
    for step in 0..<3_000 {
        now = Double(step) * 0.01
        if !alice.isCongested { alice.stored(own: signed(alice.makeBroadcast(body: [UInt8](repeating: 1, count: 1024)))) }
        if step % 10 == 0 {
            _ = alice.receiveDigest(.init(delivered: [a: alice.ownSeq], storedFrom: [:]), from: c, now: now)
            _ = alice.receiveDigest(silent, from: b, now: now)
        }
        if alice.isCongested { if now < settings.ackDeadline { congestedBefore += 1 } else if now > 2 * settings.ackDeadline { congestedAfterDeadline += 1 } }
    }
    #expect(congestedBefore > 0, "b pins the store until the deadline: the test must reach the limit")
    #expect(alice.laggards == [b])
    #expect(congestedAfterDeadline == 0, "b is a laggard: sends no longer wait for it")
    // Kept for b only within retainBytes, plus what a sent since the last collection (25 messages at most).
    #expect(alice.storedBytes <= settings.retainBytes + 26 * 1152, "\(alice.storedBytes)")
    // Once b acknowledges what it was behind on, it is no laggard any more.
    _ = alice.receiveDigest(.init(delivered: [a: alice.ownSeq], storedFrom: [:]), from: b, now: now + 0.3)
    #expect(alice.laggards.isEmpty)
}

/// An honest member that acknowledges late but within the deadline keeps every message it lacks.
@Test func aSlowMemberWithinTheAckDeadlineIsNoLaggard() {
    var alice = member(a, knowing: [b, c], settings: CausalBroadcast.Settings())
    var acked: UInt64 = 0
    for step in 0..<2_000 {
        let now = Double(step) * 0.01
        alice.stored(own: signed(alice.makeBroadcast(body: [1])))
        if step % 10 == 0 { _ = alice.receiveDigest(.init(delivered: [a: alice.ownSeq], storedFrom: [:]), from: c, now: now) }
        // b acknowledges, every 4 s, what was delivered 4 s before.
        if step % 400 == 0 {
            _ = alice.receiveDigest(.init(delivered: [a: acked], storedFrom: [:]), from: b, now: now)
            acked = alice.ownSeq
        }
        #expect(alice.laggards.isEmpty)
    }
    #expect(!alice.stored(origin: a, from: acked, to: acked).isEmpty, "what b lacks is still stored")
}

/// One origin sends a gap and 2,000 messages above it: it holds back at most its count budget, the
/// rest is refused (and repaired later), other origins and this member's sends are untouched, and
/// what waits for a gap nobody fills expires. Before: 50,000 messages with a gap filled the whole
/// hold-back within the byte budget and every send in the session answered `busy`.
@Test func oneOriginsHeldMessagesAreCappedInCountAndExpire() {
    var settings = CausalBroadcast.Settings()
    settings.holdbackCountPerOrigin = 100
    settings.holdbackLimit = 400
    var bob = member(b, knowing: [a, x], settings: settings)
    var mallory = CausalBroadcast(local: x, awaitingBaseline: false)
    _ = mallory.setMembers([a, b, x], now: 0)
    let flood = (0..<2_000).map { _ in signed(mallory.makeBroadcast(body: [0])) }
    for m in flood.dropFirst() { _ = bob.receive(m) }
    #expect(bob.heldCounts[x] == 100 && bob.heldCount == 100)
    #expect(!bob.isCongested)
    #expect(bob.refusals[.heldBytes] == 1_899)
    // Another origin's out-of-order message still finds room.
    var alice = member(a, knowing: [b, x], settings: settings)
    let a1 = signed(alice.makeBroadcast(body: [1])), a2 = signed(alice.makeBroadcast(body: [2]))
    _ = bob.receive(a2)
    #expect(bob.heldCounts[a] == 1)
    let released = bob.receive(a1)
    #expect(released.count == 2)
    // Nothing from mallory is delivered for heldExpiry: what it held is dropped.
    let digest = CausalBroadcast.Digest(delivered: [:], storedFrom: [:])
    _ = bob.receiveDigest(digest, from: a, now: 1)
    _ = bob.receiveDigest(digest, from: a, now: 1 + settings.heldExpiry / 2)
    #expect(bob.heldCounts[x] == 100)
    _ = bob.receiveDigest(digest, from: a, now: 1 + settings.heldExpiry)
    #expect(bob.heldCounts[x] == nil && bob.heldCount == 0)
    #expect(bob.refusals[.heldExpired] == 100)
    // The gap filled later still delivers, in order (held messages are repaired, not lost).
    var out = bob.receive(flood[0])
    for m in flood.dropFirst() { out += bob.receive(m) }
    #expect(out.count == 2_000)
}

/// Issue 33: a hostile origin that trickles one deliverable message every 50 s (under `heldExpiry`)
/// while it keeps a block held above a gap nobody can fill: the held block goes after twice
/// `heldExpiry` of holding without a pause, whatever the trickle. Before, each delivery restarted
/// the expiry and the block stayed for as long as the trickle went on.
@Test func heldMessagesExpireEvenWhileTheirOriginTricklesDeliveries() {
    let (a, b, x) = (MemberID(raw: 1), MemberID(raw: 2), MemberID(raw: 9))
    var settings = CausalBroadcast.Settings()
    settings.holdbackCountPerOrigin = 100
    var bob = member(b, knowing: [a, x], settings: settings)
    var mallory = member(x, knowing: [a, b], settings: settings)
    var trickle = (0..<10).map { _ in signed(mallory.makeBroadcast(body: [1])) }
    // The block: seqs 12...61, above seq 11, which mallory never sends.
    _ = mallory.makeBroadcast(body: [0])
    let block = (0..<50).map { _ in signed(mallory.makeBroadcast(body: [2])) }
    for m in block { _ = bob.receive(m) }
    #expect(bob.heldCounts[x] == 50)
    let digest = CausalBroadcast.Digest(delivered: [:], storedFrom: [:])
    var now = 1.0
    var lastHeld = 0.0
    while now <= 1 + 3 * settings.heldExpiry, !trickle.isEmpty {
        #expect(bob.receive(trickle.removeFirst()).count == 1, "the trickle is delivered")
        _ = bob.receiveDigest(digest, from: a, now: now)
        if bob.heldCounts[x] != nil { lastHeld = now }
        now += 50
    }
    #expect(bob.heldCounts[x] == nil, "the block is still held after \(now - 1) s of trickling")
    #expect(lastHeld < 1 + 2 * settings.heldExpiry + 50, "held until \(lastHeld)")
    #expect(bob.refusals[.heldExpired] == 50)
}
