import HuddleCrypto
import Testing
@testable import HuddleCore

/// Pure tests of gaps (CONTROL.md, `gap`): broadcasts that no member stores any more are given up on
/// once no peer has offered them for `gapDelay`, reported once with the origin's own count of
/// non-message broadcasts, and never skipped while any peer still offers them.
private let a = MemberID(raw: 1), b = MemberID(raw: 2), c = MemberID(raw: 3), h = MemberID(raw: 4)
private let identities = [a: Identity.generate(), b: Identity.generate(), c: Identity.generate()]

private func signed(_ m: WireMessage) -> SignedMessage {
    MessageBatch.sign([m], identity: identities[m.origin] ?? .generate())[0]
}

private func member(_ id: MemberID, knowing others: [MemberID]) -> CausalBroadcast {
    var cb = CausalBroadcast(local: id, awaitingBaseline: false)
    for o in others { _ = cb.linkHello(origin: o, seq: 0) }
    _ = cb.setMembers(Set(others + [id]), now: 0)
    return cb
}

private func gaps(_ effects: [CausalBroadcast.Effect]) -> [(MemberID, ClosedRange<UInt64>, UInt64?)] {
    effects.compactMap { if case let .gap(origin, from, to, count) = $0 { (origin, from...to, count) } else { nil } }
}

private func delivered(_ effects: [CausalBroadcast.Effect]) -> [UInt64] {
    effects.compactMap { if case let .deliver(s) = $0 { s.message.seq } else { nil } }
}

private func requests(_ effects: [CausalBroadcast.Effect]) -> [(MemberID, ClosedRange<UInt64>)] {
    effects.compactMap { if case let .request(peer, _, from, to) = $0 { (peer, from...to) } else { nil } }
}

/// Alice's broadcasts 1...10, the fifth a journal entry (a non-message broadcast).
private func alicesTen() -> (CausalBroadcast, [SignedMessage]) {
    var alice = member(a, knowing: [b, c])
    let sent = (1...10).map { n in signed(alice.makeBroadcast(body: [UInt8(n)], kind: n == 5 ? .journal : .application)) }
    return (alice, sent)
}

@Test func aBroadcastCarriesItsOriginsSignedCountOfNonMessageBroadcastsBeforeIt() throws {
    let (_, sent) = alicesTen()
    #expect(sent.map(\.message.nonApplicationBefore) == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    // The count is on the wire and signed: decoding gives it back, and a count not below the seq is refused.
    let decoded = try LinkMessage.decode(LinkMessage.message(sent[7]).encoded())
    guard case let .message(back) = decoded else { Issue.record("not a message"); return }
    #expect(back.message.nonApplicationBefore == 1)
    var bad = sent[0].message
    bad.nonApplicationBefore = 1  // seq 1 cannot have one broadcast before it
    #expect(throws: CoreError.self) { try LinkMessage.decode(LinkMessage.message(SignedMessage(message: bad, proof: sent[0].proof)).encoded()) }
}

@Test func whatNoPeerStoresIsGivenUpOnceAndDeliveriesGoOnAfterIt() {
    let (_, sent) = alicesTen()
    var carol = member(c, knowing: [a, b])
    for m in sent[0..<2] { _ = carol.receive(m) }
    // Bob delivered all ten and stores Alice's from 8 on: 3...7 are stored nowhere.
    let bobs = CausalBroadcast.Digest(delivered: [a: 10, b: 0], storedFrom: [a: 8, b: 1])
    // Alice's own digest backs the gap's end (she made 10): Bob's word alone would not.
    let alices = CausalBroadcast.Digest(delivered: [a: 10], storedFrom: [a: 8], ownNonApplication: 1)
    var out: [CausalBroadcast.Effect] = []
    var t = 0.0
    while t < 4.9 {
        out += carol.receiveDigest(bobs, from: b, now: t)
        out += carol.receiveDigest(alices, from: a, now: t + 0.01)
        t += 0.5
    }
    #expect(gaps(out).isEmpty && requests(out).isEmpty, "nothing is given up before gapDelay")
    out = carol.receiveDigest(bobs, from: b, now: 5.0)
    #expect(gaps(out).isEmpty, "the gap waits for what Alice signed about its count there")
    out = carol.receiveDigest(bobs, from: b, now: 5.4)
    #expect(requests(out).map(\.1) == [8...10], "repair asks for what follows the gap")
    #expect(carol.delivered[a] == 2)
    var after: [CausalBroadcast.Effect] = []
    for m in sent[7...] { after += carol.receive(m) }
    let found = gaps(after)
    #expect(found.count == 1 && found.first?.1 == 3...7 && found.first?.2 == 1, "one gap, 3...7, with Alice's signed count (the journal entry at 5)")
    #expect(delivered(after) == [8, 9, 10])
    // The gap comes before what follows it.
    #expect(after.firstIndex { if case .gap = $0 { true } else { false } } == 0)
    #expect(carol.delivered[a] == 10 && carol.gapSeqs == 5 && carol.heldCount == 0)
}

@Test func anyPeerThatStillOffersTheNextSeqKeepsTheGapFromBeingDeclared() {
    let (_, sent) = alicesTen()
    var carol = member(c, knowing: [a, b, h])
    for m in sent[0..<2] { _ = carol.receive(m) }
    // A hostile member claims to store only from 9; Bob still stores from 3.
    let lie = CausalBroadcast.Digest(delivered: [a: 10], storedFrom: [a: 9])
    let bobs = CausalBroadcast.Digest(delivered: [a: 10, b: 0], storedFrom: [a: 3, b: 1])
    var out: [CausalBroadcast.Effect] = []
    var t = 0.0
    while t < 30 {
        out += carol.receiveDigest(lie, from: h, now: t)
        if Int(t * 10) % 10 == 0 { out += carol.receiveDigest(bobs, from: b, now: t + 0.05) }  // one digest a second
        t += 0.1
    }
    #expect(gaps(out).isEmpty, "an honest offer at any digest starts the wait again")
    #expect(requests(out).contains { $0.0 == b && $0.1.lowerBound == 3 }, "Bob is asked for what he stores")
    for m in sent[2...] { out += carol.receive(m) }
    #expect(gaps(out).isEmpty && carol.delivered[a] == 10 && carol.gapSeqs == 0)
}

@Test func aPeerThatOffersTheNextSeqAndNeverSendsItCannotHoldAGapOpen() {
    let (_, sent) = alicesTen()
    var carol = member(c, knowing: [a, b, h])
    for m in sent[0..<2] { _ = carol.receive(m) }
    // A hostile member offers everything from 3 and answers no request; Bob stores from 8 only,
    // and Alice's own digest backs her count at 10.
    let lie = CausalBroadcast.Digest(delivered: [a: 10], storedFrom: [a: 3])
    let bobs = CausalBroadcast.Digest(delivered: [a: 10, b: 0], storedFrom: [a: 8, b: 1])
    let alices = CausalBroadcast.Digest(delivered: [a: 10], storedFrom: [a: 8], ownNonApplication: 1)
    var out: [CausalBroadcast.Effect] = []
    var t = 0.0
    /// One round: each member's digest, a tenth of a second apart from the next round.
    func exchangeDigests() {
        out += carol.receiveDigest(lie, from: h, now: t)
        out += carol.receiveDigest(bobs, from: b, now: t + 0.01)
        out += carol.receiveDigest(alices, from: a, now: t + 0.02)
        t += 0.1
    }
    while t < 4.9 { exchangeDigests() }
    #expect(requests(out).contains { $0.0 == h && $0.1.lowerBound == 3 }, "the member that offers 3 is asked for it")
    #expect(gaps(out).isEmpty, "nothing is given up while the offer is fresh")
    // Asked for 5 s and never sent: its offer no longer resets the wait, and the gap is declared
    // up to what Bob stores; repair then asks Bob for 8...10, and the gap closes before them.
    let movedToBob = { requests(out).contains { $0.0 == b && $0.1.lowerBound == 8 } }
    while t < 30 && !movedToBob() { exchangeDigests() }
    #expect(movedToBob(), "repair moves past the gap to Bob")
    #expect(t < 12, "the gap is declared within two gap delays of the first ask (at \(t) s)")
    var after: [CausalBroadcast.Effect] = []
    for m in sent[7...] { after += carol.receive(m) }
    let found = gaps(out + after)
    #expect(found.count == 1 && found.first?.1 == 3...7, "one gap, 3...7, although a member kept offering 3: \(found)")
    #expect(carol.delivered[a] == 10)
}

@Test func aGapThatReachesTheOriginsLastBroadcastIsClosedByTheOriginsOwnDigest() {
    var (alice, sent) = alicesTen()
    var carol = member(c, knowing: [a, b])
    for m in sent[0..<2] { _ = carol.receive(m) }
    // Everyone acknowledged everything and dropped it: Alice stores nothing of her own.
    let digest = alice.digest()
    #expect(digest.ownNonApplication == 1 && digest.delivered[a] == 10)
    let alices = CausalBroadcast.Digest(delivered: [a: 10], storedFrom: [a: 11], ownNonApplication: 1)
    var out: [CausalBroadcast.Effect] = []
    let bobs = CausalBroadcast.Digest(delivered: [a: 10, b: 0], storedFrom: [a: 11, b: 1])
    for step in 0...60 {
        out += carol.receiveDigest(alices, from: a, now: Double(step) * 0.1)
        out += carol.receiveDigest(bobs, from: b, now: Double(step) * 0.1 + 0.01)
    }
    let found = gaps(out)
    #expect(found.count == 1 && found.first?.1 == 3...10 && found.first?.2 == 1)
    #expect(carol.delivered[a] == 10)
    // Alice goes on: her next broadcast is delivered in line.
    let next = signed(alice.makeBroadcast(body: [11]))
    #expect(delivered(carol.receive(next)) == [11])
    #expect(next.message.nonApplicationBefore == 1)
}

@Test func anotherMembersWordAboutTheOriginsCountIsNotTaken() {
    let (_, sent) = alicesTen()
    var carol = member(c, knowing: [a, b])
    for m in sent[0..<2] { _ = carol.receive(m) }
    // Bob (not the origin) says Alice stores nothing past 10 and that her count is 7: only Alice's
    // own digest or broadcast may say that, so the gap stays open.
    let bobs = CausalBroadcast.Digest(delivered: [a: 10, b: 0], storedFrom: [a: 11, b: 1], ownNonApplication: 7)
    var out: [CausalBroadcast.Effect] = []
    for step in 0...90 { out += carol.receiveDigest(bobs, from: b, now: Double(step) * 0.1) }
    #expect(gaps(out).isEmpty && carol.delivered[a] == 2)
}

@Test func theApplicationSeqsOfAGapUseTheCountAndStayIncreasingWhateverItSays() {
    var seqs = ApplicationSeqs()
    seqs.start(a, at: 2, count: 0)
    // Broadcasts 3...7 lost, one of them a journal entry: messages 3...6 lost, broadcast 8 is message 7.
    #expect(seqs.skip(a, from: 3, to: 7, nonApplicationThrough: 1) == 3...6)
    #expect(seqs.applicationSeq(a, 8) == 7)
    // A count above what the gap allows is cut to it (all journal entries: no message lost).
    var hostile = ApplicationSeqs()
    hostile.start(a, at: 2, count: 0)
    #expect(hostile.skip(a, from: 3, to: 7, nonApplicationThrough: 1_000_000) == nil)
    #expect(hostile.applicationSeq(a, 8) == 3)
    // A count below what was counted before the gap is raised to it; unknown counts take all as messages.
    var low = ApplicationSeqs()
    low.start(a, at: 2, count: 1)
    #expect(low.skip(a, from: 3, to: 4, nonApplicationThrough: 0) == 2...3)
    var unknown = ApplicationSeqs()
    unknown.start(a, at: 2, count: 0)
    #expect(unknown.skip(a, from: 3, to: 4, nonApplicationThrough: nil) == 3...4)
    #expect(unknown.skip(a, from: 9, to: 3, nonApplicationThrough: nil) == nil, "a backwards range is nothing")
}

@Test func aGoneOriginsGapIsClosedAsFarAsHeldMessagesDependOnIt() {
    let (_, sent) = alicesTen()
    var bob = member(b, knowing: [a, c])
    for m in sent { _ = bob.receive(m) }
    let reply = signed(bob.makeBroadcast(body: Array("re".utf8)))
    #expect(reply.message.deps.contains(.init(member: a, seq: 10)))
    var carol = member(c, knowing: [a, b])
    for m in sent[0..<2] { _ = carol.receive(m) }
    #expect(delivered(carol.receive(reply)).isEmpty, "Bob's reply waits for Alice's 10")
    // Alice is gone, and nobody stores her broadcasts any more.
    _ = carol.setMembers([b, c], now: 0)
    let bobs = CausalBroadcast.Digest(delivered: [a: 10, b: 1], storedFrom: [a: 11, b: 1])
    var out: [CausalBroadcast.Effect] = []
    for step in 0...120 { out += carol.receiveDigest(bobs, from: b, now: Double(step) * 0.1) }
    let found = gaps(out)
    #expect(found.count == 1 && found.first?.1 == 3...10 && found.first.map { $0.2 == nil } == true)
    #expect(delivered(out) == [1], "Bob's reply is delivered after the gap")
}

@Test func aGapWaitsForEveryLiveMembersDigestAndIsOffWhenAMessageInsideItArrives() {
    var (alice, sent) = alicesTen()
    var carol = member(c, knowing: [a, b])
    for m in sent[0..<2] { _ = carol.receive(m) }
    let alices = CausalBroadcast.Digest(delivered: [a: 10], storedFrom: [a: 8], ownNonApplication: 1)
    var out: [CausalBroadcast.Effect] = []
    // Bob (live) sends no digest: the wait holds until six times gapDelay.
    for step in 0...350 { out += carol.receiveDigest(alices, from: a, now: Double(step) * 0.1) }
    #expect(requests(out).contains { $0.1.lowerBound == 8 }, "given up on at last: repair asks for what follows")
    // A broadcast inside the gap comes after all (relayed late): the gap is off and it is delivered.
    let third = carol.receive(sent[2])
    #expect(delivered(third) == [3] && gaps(third).isEmpty)
    var after: [CausalBroadcast.Effect] = []
    for m in sent[7...] { after += carol.receive(m) }
    #expect(gaps(after).isEmpty && delivered(after).isEmpty, "nothing skipped once the gap is off")
    _ = alice
}

@Test func anOriginsOwnPendingBatchIsNeverShownAsStoredNowhere() {
    var alice = member(a, knowing: [b, c])
    let first = signed(alice.makeBroadcast(body: [1]))
    alice.stored(own: first)
    _ = alice.makeBroadcast(body: [2])  // in the pending batch: not signed, not stored yet
    #expect(alice.digest().storedFrom[a] == 1)
    _ = alice.receiveDigest(CausalBroadcast.Digest(delivered: [a: 1, b: 0, c: 0], storedFrom: [:]), from: b, now: 0)
    _ = alice.receiveDigest(CausalBroadcast.Digest(delivered: [a: 1, b: 0, c: 0], storedFrom: [:]), from: c, now: 0)
    _ = alice.setMembers([a, b, c], now: 1)
    #expect((alice.digest().storedFrom[a] ?? .max) <= 2, "the pending seq 2 is offered, not shown as dropped")
}

@Test func countsPastWhatAMemberMayMakeNeverMoveTheClock() {
    let (_, sent) = alicesTen()
    var carol = member(c, knowing: [a, b])
    for m in sent[0..<2] { _ = carol.receive(m) }
    let huge = WireReader.maximumCount
    let alices = CausalBroadcast.Digest(delivered: [a: huge], storedFrom: [:], ownNonApplication: 0)
    let bobs = CausalBroadcast.Digest(delivered: [a: huge, b: 0], storedFrom: [a: huge], ownNonApplication: 0)
    var out: [CausalBroadcast.Effect] = []
    for step in 0...400 {
        out += carol.receiveDigest(alices, from: a, now: Double(step) * 0.1)
        out += carol.receiveDigest(bobs, from: b, now: Double(step) * 0.1 + 0.01)
    }
    #expect(gaps(out).isEmpty && carol.delivered[a] == 2)
    #expect((carol.digest().storedFrom[a] ?? 0) <= WireReader.maximumCount)
}
