import HuddleCrypto
import Testing
@testable import HuddleCore

/// Pure tests of the causal broadcast's delivery rules, with one signing identity per origin.
private let a = MemberID(raw: 1), b = MemberID(raw: 2), c = MemberID(raw: 3)
private let identities = [a: Identity.generate(), b: Identity.generate(), c: Identity.generate()]

private func signed(_ m: WireMessage) -> SignedMessage {
    MessageBatch.sign([m], identity: identities[m.origin] ?? .generate())[0]
}

private func delivered(_ effects: [CausalBroadcast.Effect]) -> [String] {
    effects.compactMap { if case let .deliver(s) = $0 { s.message.id } else { nil } }
}

private func member(_ id: MemberID, knowing others: [MemberID]) -> CausalBroadcast {
    var cb = CausalBroadcast(local: id, awaitingBaseline: false)
    for o in others { _ = cb.linkHello(origin: o, seq: 0) }
    _ = cb.setMembers(Set(others + [id]), now: 0)
    return cb
}

@Test func broadcastsAreDeliveredInOrderOnceAndHeldUntilTheirPredecessor() {
    var sender = member(a, knowing: [b, c])
    var receiver = member(b, knowing: [a, c])
    let m1 = signed(sender.makeBroadcast(body: [1])), m2 = signed(sender.makeBroadcast(body: [2]))
    let early = receiver.receive(m2)
    #expect(delivered(early).isEmpty && receiver.heldCount == 1)
    let both = receiver.receive(m1)
    #expect(delivered(both) == [m1.message.id, m2.message.id])
    let again = receiver.receive(m1)
    #expect(delivered(again).isEmpty && receiver.duplicates == 1)
    #expect(receiver.delivered[a] == 2)
}

@Test func aReplyWaitsForWhatItAnswers() {
    var alice = member(a, knowing: [b, c]), bob = member(b, knowing: [a, c]), carol = member(c, knowing: [a, b])
    let question = signed(alice.makeBroadcast(body: Array("q".utf8)))
    _ = bob.receive(question)
    let answer = signed(bob.makeBroadcast(body: Array("a".utf8)))
    #expect(answer.message.deps == [.init(member: a, seq: 1)])
    let first = carol.receive(answer)
    #expect(delivered(first).isEmpty, "the reply must wait for the question")
    let then = carol.receive(question)
    #expect(delivered(then) == [question.message.id, answer.message.id])
}

@Test func aDirectedMessageWaitsForItsDependencies() {
    var alice = member(a, knowing: [b, c]), bob = member(b, knowing: [a, c])
    let broadcast = signed(alice.makeBroadcast(body: [1]))
    let directed = signed(alice.makeDirected(body: [2], to: [b]))
    #expect(directed.message.seq == 0 && directed.message.deps.contains(.init(member: a, seq: 1)))
    let early = bob.receive(directed)
    #expect(delivered(early).isEmpty)
    let both = bob.receive(broadcast)
    #expect(delivered(both) == [broadcast.message.id, directed.message.id])
    var carol = member(c, knowing: [a, b])
    let notForCarol = carol.receive(directed)
    #expect(delivered(notForCarol).isEmpty && carol.heldCount == 0)
}

@Test func aReplayedDirectedMessageIsADuplicate() {
    var alice = member(a, knowing: [b]), bob = member(b, knowing: [a])
    let first = signed(alice.makeDirected(body: [1], to: [b]))
    let second = signed(alice.makeDirected(body: [2], to: [b]))
    #expect(delivered(bob.receive(second)) == [second.message.id])
    #expect(delivered(bob.receive(first)) == [first.message.id], "reordered within the window: taken")
    let duplicates = bob.duplicates
    #expect(delivered(bob.receive(first)).isEmpty && delivered(bob.receive(second)).isEmpty, "a replay is not delivered again")
    #expect(bob.duplicates == duplicates + 2 && bob.heldCount == 0)
}

@Test func gapsAreRepairedFromAPeerThatStoresThemAfterTheRepairDelay() {
    var alice = member(a, knowing: [b, c]), bob = member(b, knowing: [a, c]), carol = member(c, knowing: [a, b])
    let m1 = signed(alice.makeBroadcast(body: [1]))
    alice.stored(own: m1)
    _ = bob.receive(m1)
    // carol missed m1; bob's digest shows it; carol asks only after lagging for the repair delay.
    let first = carol.receiveDigest(bob.digest(), from: b, now: 0)
    #expect(first.isEmpty)
    let second = carol.receiveDigest(bob.digest(), from: b, now: 0.5)
    #expect(second == [.request(peer: b, origin: a, from: 1, to: 1)])
    let repaired = bob.stored(origin: a, from: 1, to: 1)
    #expect(repaired == [m1])
    let delivery = carol.receive(repaired[0])
    #expect(delivered(delivery) == [m1.message.id])
    let caughtUp = carol.receiveDigest(bob.digest(), from: b, now: 1)
    #expect(caughtUp.isEmpty)
}

@Test func aMemberThatKeepsDeliveringNeverAsksAndAStalledOneAsksOnlyForWhatItLacks() {
    var alice = member(a, knowing: [b, c]), bob = member(b, knowing: [a, c]), carol = member(c, knowing: [a, b])
    let stream = (0..<40).map { _ -> SignedMessage in
        let m = signed(alice.makeBroadcast(body: [1]))
        alice.stored(own: m)
        return m
    }
    // Bob is always ten messages ahead of carol (a stream in flight): carol's deliveries keep moving,
    // so however long she lags, she asks for nothing.
    var asked: [CausalBroadcast.Effect] = []
    for step in 0..<30 {
        for m in stream[0...(step + 10)] { _ = bob.receive(m) }
        _ = carol.receive(stream[step])
        asked += carol.receiveDigest(bob.digest(), from: b, now: Double(step) * 0.1)
    }
    #expect(asked.isEmpty, "a member whose deliveries move on must not ask for messages in flight: \(asked)")
    // Then carol stalls at 30: 31 and 33...35 are lost, 32 and 36 arrived and are held. Once the
    // stall lasts the repair delay she asks for the two runs she lacks, not for what she holds.
    _ = carol.receive(stream[31])
    _ = carol.receive(stream[35])
    for m in stream { _ = bob.receive(m) }
    let first = carol.receiveDigest(bob.digest(), from: b, now: 3.0)
    let second = carol.receiveDigest(bob.digest(), from: b, now: 3.2)
    #expect(first.isEmpty && second.isEmpty, "the stall has not lasted the repair delay yet")
    let due = carol.receiveDigest(bob.digest(), from: b, now: 3.4)
    #expect(due == [.request(peer: b, origin: a, from: 31, to: 31), .request(peer: b, origin: a, from: 33, to: 35)])
    var out: [CausalBroadcast.Effect] = []
    for effect in due {
        guard case let .request(_, origin, from, to) = effect else { continue }
        for m in bob.stored(origin: origin, from: from, to: to) { out += carol.receive(m) }
    }
    #expect(carol.delivered[a] == 36)
    // What the repair released counts as its answer, not as a stream moving on: the tail (37...40)
    // is asked for at once, without a second repair delay.
    let tail = carol.receiveDigest(bob.digest(), from: b, now: 3.5)
    #expect(tail == [.request(peer: b, origin: a, from: 37, to: 40)])
}

@Test func storedMessagesAreDroppedOnceEveryMemberAcknowledgedOrLeft() {
    var alice = member(a, knowing: [b, c]), bob = member(b, knowing: [a, c])
    let m1 = signed(alice.makeBroadcast(body: [1]))
    alice.stored(own: m1)
    _ = bob.receive(m1)
    #expect(alice.storedCount == 1 && bob.storedCount == 1)
    _ = alice.receiveDigest(bob.digest(), from: b, now: 0)
    #expect(alice.storedCount == 1, "carol has not acknowledged yet")
    _ = alice.setMembers([a, b], now: 0)
    #expect(alice.storedCount == 1, "carol failed: m1 is kept in case she comes back")
    alice.memberLeft(c, now: 0)
    #expect(alice.storedCount == 0, "carol left: nobody is waiting for m1 any more")
    _ = bob.setMembers([a, b], now: 0)
    bob.memberLeft(c, now: 0)
    _ = bob.receiveDigest(alice.digest(), from: a, now: 0)
    #expect(bob.storedCount == 0 && bob.storedBytes == 0)
}

@Test func aJoinerStartsAfterItsSponsorsBaselineAndDeliversNothingBefore() {
    var alice = member(a, knowing: [b])
    let old = (0..<3).map { _ in signed(alice.makeBroadcast(body: [0])) }
    var joiner = CausalBroadcast(local: c, awaitingBaseline: true)
    let next = signed(alice.makeBroadcast(body: [9]))
    let before = joiner.receive(next)
    #expect(delivered(before).isEmpty)
    let after = joiner.adoptBaseline([a: 3, b: 0])
    #expect(delivered(after) == [next.message.id])
    #expect(joiner.baseline[a] == 3)
    let stale = joiner.receive(old[0])
    #expect(delivered(stale).isEmpty)
}

@Test func theHoldBackBoundRefusesAndALaterRepairStillDelivers() {
    var settings = CausalBroadcast.Settings()
    settings.holdbackLimit = 2
    var alice = member(a, knowing: [b])
    var bob = CausalBroadcast(local: b, awaitingBaseline: false, settings: settings)
    _ = bob.linkHello(origin: a, seq: 0)
    _ = bob.setMembers([a, b], now: 0)
    let messages = (0..<4).map { _ in signed(alice.makeBroadcast(body: [7])) }
    for m in messages.dropFirst() { _ = bob.receive(m) }
    #expect(bob.heldCount == 2 && bob.refusedForRoom == 1)
    var out = bob.receive(messages[0])
    out += bob.receive(messages[3])
    #expect(delivered(out) == messages.map(\.message.id))
}

@Test func batchSignaturesVerifyAndForgeriesDoNot() {
    let alice = identities[a] ?? .generate()
    var cb = CausalBroadcast(local: a, awaitingBaseline: false)
    let batch = MessageBatch.sign((0..<5).map { _ in cb.makeBroadcast(body: [1, 2]) }, identity: alice)
    var cache = VerifiedRoots()
    #expect(batch.allSatisfy { MessageBatch.verify($0, originNodeKey: alice.publicKey, cache: &cache) })
    var tampered = batch[2]
    tampered.message.body = [9]
    #expect(!MessageBatch.verify(tampered, originNodeKey: alice.publicKey, cache: &cache))
    let forged = MessageBatch.sign([batch[0].message], identity: .generate())[0]
    var fresh = VerifiedRoots()
    #expect(!MessageBatch.verify(forged, originNodeKey: alice.publicKey, cache: &fresh))
    var wrongIndex = batch[1]
    wrongIndex.proof.index = 3
    #expect(!MessageBatch.verify(wrongIndex, originNodeKey: alice.publicKey, cache: &fresh))
}

/// A batch crosses a link as one message: the receiver gets what is for it plus the leaf hashes of
/// the rest, checks one signature, and can relay any message alone with a proof taken from the tree.
@Test func aBatchOnTheWireVerifiesOnceAndItsMessagesRelayAlone() throws {
    let alice = identities[a] ?? .generate()
    var cb = CausalBroadcast(local: a, awaitingBaseline: false)
    var messages = (0..<6).map { _ in cb.makeBroadcast(body: Array("hello".utf8)) }
    messages.insert(cb.makeDirected(body: [7], to: [c]), at: 2)
    messages.append(cb.makeDirected(body: [8], to: [b]))
    let flush = MessageBatch.sign(messages, identity: alice)
    let forBob = try #require(SignedBatch(of: flush, for: b))
    guard case let .batch(received) = try LinkMessage.decode(LinkMessage.batch(forBob).encoded()) else {
        Issue.record("a batch did not decode as a batch"); return
    }
    #expect(received == forBob)
    #expect(received.messages.map(\.message.id) == messages.filter { $0.to?.contains(b) ?? true }.map(\.id))
    var cache = VerifiedRoots()
    #expect(MessageBatch.verify(received, originNodeKey: alice.publicKey, cache: &cache))
    // Relayed alone, with the path derived from the receiver's rebuilt tree.
    var fresh = VerifiedRoots()
    for signed in received.messages {
        guard case let .message(relayed) = try LinkMessage.decode(LinkMessage.message(signed).encoded()) else {
            Issue.record("a relayed message did not decode as one"); return
        }
        #expect(MessageBatch.verify(relayed, originNodeKey: alice.publicKey, cache: &fresh))
    }
    // A message changed in flight, or a batch signed by someone else, fails as a whole.
    var bytes = LinkMessage.batch(forBob).encoded()
    let hello = try #require(bytes.firstRange(of: Array("hello".utf8)))
    bytes[hello.lowerBound] ^= 1
    guard case let .batch(tampered) = try LinkMessage.decode(bytes) else { Issue.record("the changed batch did not decode"); return }
    #expect(!MessageBatch.verify(tampered, originNodeKey: alice.publicKey, cache: &fresh))
    let forged = try #require(SignedBatch(of: MessageBatch.sign(messages, identity: .generate()), for: b))
    #expect(!MessageBatch.verify(forged, originNodeKey: alice.publicKey, cache: &fresh))
    // Nothing for a member that is neither a target nor a broadcast recipient: no batch at all.
    #expect(SignedBatch(of: MessageBatch.sign([messages[2]], identity: alice), for: b) == nil)
}

/// A batch's signature checked off the core (`MessageBatch.check`, on a link's reader): it passes
/// for the origin's key only, and what it remembers is what the core's own check remembers, so
/// the core does not check that batch again (`SessionCore.signaturesChecked`).
@Test func aBatchCheckedOffTheCoreIsTheCoresOwnCheck() throws {
    let alice = identities[a] ?? .generate()
    var cb = CausalBroadcast(local: a, awaitingBaseline: false)
    let messages = (0..<4).map { _ in cb.makeBroadcast(body: Array("hi".utf8)) }
    let batch = try #require(SignedBatch(of: MessageBatch.sign(messages, identity: alice), for: b))
    let checked = try #require(MessageBatch.check(batch, originNodeKey: alice.publicKey))
    #expect(checked.origin == a && checked.originNodeKey == alice.publicKey)
    #expect(MessageBatch.check(batch, originNodeKey: Identity.generate().publicKey) == nil, "another key")
    let forged = try #require(SignedBatch(of: MessageBatch.sign(messages, identity: .generate()), for: b))
    #expect(MessageBatch.check(forged, originNodeKey: alice.publicKey) == nil, "another signer")
    var cache = VerifiedRoots()
    cache.insert(checked.verified)
    // Remembered: the core's check of this batch is then a cache hit, even with a key it would refuse.
    #expect(MessageBatch.verify(batch, originNodeKey: Identity.generate().publicKey, cache: &cache))
    #expect(!MessageBatch.verify(forged, originNodeKey: alice.publicKey, cache: &cache), "only that batch")
}

/// A message passed on alone (a repair's, a relay's) checked off the core: its proof leads to its
/// batch's root, so one check covers every message of that batch (`signs`), and the core's own
/// check of each is then a cache hit. A changed message, or another signer, does not pass.
@Test func aMessagePassedOnAloneCheckedOffTheCoreCoversItsBatch() throws {
    let alice = identities[a] ?? .generate()
    var cb = CausalBroadcast(local: a, awaitingBaseline: false)
    let signed = MessageBatch.sign((0..<4).map { _ in cb.makeBroadcast(body: Array("hi".utf8)) }, identity: alice)
    let checked = try #require(MessageBatch.check(signed[1], originNodeKey: alice.publicKey))
    #expect(checked.origin == a && checked.originNodeKey == alice.publicKey)
    #expect(MessageBatch.check(signed[1], originNodeKey: Identity.generate().publicKey) == nil, "another key")
    var changed = signed[1]
    changed.message.body = Array("ho".utf8)
    #expect(MessageBatch.check(changed, originNodeKey: alice.publicKey) == nil, "a changed message")
    #expect(checked.signs(signed[3]), "a message of the same batch carries the same signature")
    let other = MessageBatch.sign([cb.makeBroadcast(body: [1])], identity: alice)
    #expect(!checked.signs(other[0]), "another batch's does not")
    var cache = VerifiedRoots()
    cache.insert(checked.verified)
    for m in signed { #expect(MessageBatch.verify(m, originNodeKey: Identity.generate().publicKey, cache: &cache)) }
    #expect(!MessageBatch.verify(changed, originNodeKey: alice.publicKey, cache: &cache), "only that batch's messages")
}

@Test func activityConvergesWhateverTheOrder() {
    let id = identities[a] ?? .generate()
    let records = [ActivityRecord.make(lamport: 1, setBy: a, value: [1], identity: id),
                   ActivityRecord.make(lamport: 2, setBy: a, value: [2], identity: id),
                   ActivityRecord.make(lamport: 2, setBy: c, value: [3], identity: id)]
    var forward = ActivityRegister(), backward = ActivityRegister()
    for r in records { _ = forward.apply(r) }
    for r in records.reversed() { _ = backward.apply(r) }
    #expect(forward.current == backward.current && forward.current?.value == [3])
    #expect(forward.nextLamport(wallClock: 0) == 3)
    #expect(records[0].verify(nodeKey: id.publicKey))
    var tampered = records[0]
    tampered.value = [8]
    #expect(!tampered.verify(nodeKey: id.publicKey))
}

/// A member that broadcasts before its link to another member is up (a joiner drawing at once)
/// must still reach it: the hello on the late link names the seq from which it knew that member,
/// not its seq now, so the receiver repairs what went only to the others. (With the current seq
/// the receiver started after those broadcasts and never delivered them: a DrawTogether canvas
/// lost a late joiner's first points at one member.)
@Test func broadcastsMadeBeforeALinkWasUpAreRepairedOverIt() {
    var alice = member(a, knowing: [b, c]), bob = member(b, knowing: [a])
    var carol = CausalBroadcast(local: c, awaitingBaseline: true)
    _ = carol.linkHello(origin: a, seq: alice.helloSeq(for: c))
    _ = carol.adoptBaseline(alice.delivered)
    _ = carol.setMembers([a, b, c], now: 0)
    // carol broadcasts twice while only its link to alice is up.
    let early = (0..<2).map { _ in signed(carol.makeBroadcast(body: [5])) }
    for m in early { carol.stored(own: m); _ = alice.receive(m) }
    // Then the link to bob comes up, and bob learns of carol.
    _ = bob.setMembers([a, b, c], now: 0)
    #expect(carol.helloSeq(for: b) == 0)
    _ = bob.linkHello(origin: c, seq: carol.helloSeq(for: b))
    let late = signed(carol.makeBroadcast(body: [6]))
    carol.stored(own: late)
    #expect(delivered(bob.receive(late)).isEmpty, "carol's third broadcast waits for the two before it")
    // Digests show bob carol's broadcasts; after the repair delay he asks carol, who still stores them.
    _ = bob.receiveDigest(carol.digest(), from: c, now: 0)
    let asks = bob.receiveDigest(carol.digest(), from: c, now: 5)
    var out: [CausalBroadcast.Effect] = []
    for case let .request(_, origin, from, to) in asks {
        for m in carol.stored(origin: origin, from: from, to: to) { out += bob.receive(m) }
    }
    #expect(delivered(out) == (early + [late]).map(\.message.id))
    #expect(bob.delivered[c] == 3 && bob.baseline[c] == 0)
}

@Test func messagesAreKeptForAFailedMemberUntilItComesBackAndRepairs() {
    var alice = member(a, knowing: [b, c]), carol = member(c, knowing: [a, b])
    // Carol is failed (a partition): alice goes on sending; bob acknowledges, carol cannot.
    _ = alice.setMembers([a, b], now: 1)
    #expect(alice.retainedMembers == [c])
    let sent = (0..<5).map { _ in signed(alice.makeBroadcast(body: [3])) }
    for m in sent { alice.stored(own: m) }
    var bob = member(b, knowing: [a, c])
    for m in sent { _ = bob.receive(m) }
    _ = alice.receiveDigest(bob.digest(), from: b, now: 2)
    #expect(alice.storedCount == 5, "kept for carol although every live member has them")
    // The partition heals: carol is alive again and shows she is behind; she repairs from alice.
    _ = alice.setMembers([a, b, c], now: 30)
    _ = carol.receiveDigest(alice.digest(), from: a, now: 30)
    let ask = carol.receiveDigest(alice.digest(), from: a, now: 31)
    #expect(ask == [.request(peer: a, origin: a, from: 1, to: 5)])
    var repaired: [CausalBroadcast.Effect] = []
    for m in alice.stored(origin: a, from: 1, to: 5) { repaired += carol.receive(m) }
    #expect(delivered(repaired) == sent.map(\.message.id))
    _ = alice.receiveDigest(carol.digest(), from: c, now: 32)
    #expect(alice.storedCount == 0, "acknowledged by everyone, carol included")
}

@Test func retentionForAFailedMemberEndsWithTimeOrTheByteBound() {
    var settings = CausalBroadcast.Settings()
    settings.retainForFailed = 60
    settings.retainBytes = 10 * 128 + 64
    var alice = CausalBroadcast(local: a, awaitingBaseline: false, settings: settings)
    _ = alice.linkHello(origin: b, seq: 0)
    _ = alice.linkHello(origin: c, seq: 0)
    _ = alice.setMembers([a, b, c], now: 0)
    _ = alice.setMembers([a, b], now: 0)
    let few = (0..<3).map { _ in signed(alice.makeBroadcast(body: [])) }
    for m in few { alice.stored(own: m) }
    var bob = member(b, knowing: [a, c])
    for m in few { _ = bob.receive(m) }
    _ = alice.receiveDigest(bob.digest(), from: b, now: 59)
    #expect(alice.storedCount == 3)
    _ = alice.receiveDigest(bob.digest(), from: b, now: 60)
    #expect(alice.storedCount == 0 && alice.retainedMembers.isEmpty, "retention ends after retainForFailed")
    // Past the byte bound, nothing is kept for failed members any more.
    _ = alice.setMembers([a, b, c], now: 61)
    _ = alice.setMembers([a, b], now: 62)
    let many = (0..<12).map { _ in signed(alice.makeBroadcast(body: [])) }
    for m in many { alice.stored(own: m); _ = bob.receive(m) }
    _ = alice.receiveDigest(bob.digest(), from: b, now: 63)
    #expect(alice.storedCount == 0 && alice.retainedMembers.isEmpty, "retention ends past retainBytes")
}

@Test func aReplyWaitsForAnOriginThisMemberHasNotHeardOfYet() {
    // Dave is new: bob delivered his message and replied; carol has not heard of dave at all.
    let d = MemberID(raw: 4), dave = Identity.generate()
    var daveCore = CausalBroadcast(local: d, awaitingBaseline: false)
    _ = daveCore.linkHello(origin: b, seq: 0)
    let hello = MessageBatch.sign([daveCore.makeBroadcast(body: [1])], identity: dave)[0]
    var bob = member(b, knowing: [a, c])
    _ = bob.linkHello(origin: d, seq: 0)
    _ = bob.receive(hello)
    let reply = signed(bob.makeBroadcast(body: [2]))
    #expect(reply.message.deps.contains(.init(member: d, seq: 1)))
    var carol = member(c, knowing: [a, b])
    #expect(delivered(carol.receive(reply)).isEmpty, "the reply must wait for dave's message")
    _ = carol.receiveDigest(bob.digest(), from: b, now: 0)
    #expect(delivered(carol.receiveDigest(bob.digest(), from: b, now: 5)).isEmpty)
    // Dave's link comes up: his message, then the reply.
    _ = carol.linkHello(origin: d, seq: 0)
    #expect(delivered(carol.receive(hello)) == [hello.message.id, reply.message.id])
}

@Test func aDependencyOnAnOriginNeverHeardOfIsReleasedWhenItIsGoneOrAfterTheWait() {
    let d = MemberID(raw: 4), e = MemberID(raw: 5)
    var bob = member(b, knowing: [a, c])
    _ = bob.linkHello(origin: d, seq: 5)
    _ = bob.linkHello(origin: e, seq: 5)
    let reply = signed(bob.makeBroadcast(body: [2]))
    // Deps name only what bob delivered past the baselines (none yet); then he delivers from d and e.
    var dCore = CausalBroadcast(local: d, awaitingBaseline: false), eCore = CausalBroadcast(local: e, awaitingBaseline: false)
    for _ in 0..<5 { _ = dCore.makeBroadcast(body: []); _ = eCore.makeBroadcast(body: []) }
    let fromD = MessageBatch.sign([dCore.makeBroadcast(body: [4])], identity: .generate())[0]
    let fromE = MessageBatch.sign([eCore.makeBroadcast(body: [5])], identity: .generate())[0]
    _ = bob.receive(fromD)
    _ = bob.receive(fromE)
    let answer = signed(bob.makeBroadcast(body: [6]))
    #expect(answer.message.deps.contains(.init(member: d, seq: 6)) && answer.message.deps.contains(.init(member: e, seq: 6)))
    // Carol heard of d as a member (it then failed before its link came up); of e never.
    var carol = member(c, knowing: [a, b])
    _ = carol.setMembers([a, b, c, d], now: 0)
    #expect(delivered(carol.receive(reply)) == [reply.message.id])
    #expect(delivered(carol.receive(answer)).isEmpty)
    _ = carol.setMembers([a, b, c], now: 1)
    _ = carol.receiveDigest(bob.digest(), from: b, now: 1)
    #expect(delivered(carol.receiveDigest(bob.digest(), from: b, now: 10.9)).isEmpty, "e may still come")
    #expect(delivered(carol.receiveDigest(bob.digest(), from: b, now: 11)) == [answer.message.id], "e is taken to be gone")
}

@Test func theStoreStaysWithinItsLimitAtEveryMemberWhenTheSenderOutrunsAcknowledgementsAndEverythingIsDelivered() {
    // Alice sends as fast as the shell lets her (only while not congested, as `SessionCore.send`
    // does); bob reads fast, carol five times slower; digests go both ways every 0.1 s.
    var settings = CausalBroadcast.Settings()
    let body = [UInt8](repeating: 7, count: 1024), size = body.count + 128
    settings.storeLimitBytes = 64 * size
    func make(_ id: MemberID, _ others: [MemberID]) -> CausalBroadcast {
        var cb = CausalBroadcast(local: id, awaitingBaseline: false, settings: settings)
        for o in others { _ = cb.linkHello(origin: o, seq: 0) }
        _ = cb.setMembers(Set(others + [id]), now: 0)
        return cb
    }
    var alice = make(a, [b, c]), bob = make(b, [a, c]), carol = make(c, [a, b])
    let total = 600
    var sent: [String] = [], toBob: [SignedMessage] = [], toCarol: [SignedMessage] = []
    var atBob: [String] = [], atCarol: [String] = []
    var waited = 0
    for step in 1...5000 {
        let now = Double(step) * 0.01
        for _ in 0..<50 where sent.count < total {
            guard !alice.isCongested else { waited += 1; break }
            let m = signed(alice.makeBroadcast(body: body))
            alice.stored(own: m)
            sent.append(m.message.id)
            toBob.append(m)
            toCarol.append(m)
        }
        for m in toBob.prefix(40) { atBob += delivered(bob.receive(m)) }
        toBob.removeFirst(min(40, toBob.count))
        for m in toCarol.prefix(8) { atCarol += delivered(carol.receive(m)) }
        toCarol.removeFirst(min(8, toCarol.count))
        if step % 10 == 0 {
            let (da, db, dc) = (alice.digest(), bob.digest(), carol.digest())
            _ = alice.receiveDigest(db, from: b, now: now); _ = alice.receiveDigest(dc, from: c, now: now)
            _ = bob.receiveDigest(da, from: a, now: now); _ = bob.receiveDigest(dc, from: c, now: now)
            _ = carol.receiveDigest(da, from: a, now: now); _ = carol.receiveDigest(db, from: b, now: now)
        }
        for (name, member) in [("alice", alice), ("bob", bob), ("carol", carol)] {
            #expect(member.storedBytes <= settings.storeLimitBytes + size, "\(name) stores \(member.storedBytes) bytes at \(now) s")
        }
        if sent.count == total && toCarol.isEmpty && alice.storedBytes == 0 && bob.storedBytes == 0 && carol.storedBytes == 0 { break }
    }
    #expect(waited > 0, "the sender outran carol's acknowledgements and was held back")
    #expect(sent.count == total && atBob == sent && atCarol == sent, "every message delivered once, in order, at every member")
    #expect(alice.storedBytes == 0 && bob.storedBytes == 0 && carol.storedBytes == 0, "all dropped once acknowledged")
}

@Test func aStoredMessageIsReleasedAsSoonAsItIsDropped() {
    // Two batches stored in one run; acknowledging the first drops it while the second stays.
    var run = MessageRun()
    weak var firstTree: BatchTree?
    do {
        let identity = identities[a]!
        let first = MessageBatch.sign((1...2).map { WireMessage(origin: a, counter: $0, seq: $0, to: nil, body: [1]) }, identity: identity)
        let second = MessageBatch.sign([WireMessage(origin: a, counter: 3, seq: 3, to: nil, body: [2])], identity: identity)
        firstTree = first[0].proof.tree
        for m in first + second { _ = run.append(m, bytes: { _ in 1 }) }
    }
    #expect(firstTree != nil)
    #expect(run.drop(through: 2, bytes: { _ in 1 }) == 2 && run.count == 1 && run[3] != nil)
    #expect(firstTree == nil, "what the run dropped (and no longer counts) is no longer kept alive by it")
}
