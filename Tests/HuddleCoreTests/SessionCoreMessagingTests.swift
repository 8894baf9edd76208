import HuddleCrypto
import Testing
@testable import HuddleCore

/// Pure tests of sending, signing, receiving, backpressure, activity and the journal's
/// broadcasts in `SessionCore`, with two cores handing each other their effects.
private struct Pair {
    var a: SessionCore
    var b: SessionCore
    let aInfo: MemberInfo
    let bInfo: MemberInfo

    init(storeLimit: Int? = nil) {
        let aIdentity = Identity(seed: [UInt8](repeating: 1, count: 32)), bIdentity = Identity(seed: [UInt8](repeating: 2, count: 32))
        aInfo = MemberInfo(id: MemberID(raw: 1), node: aIdentity.publicKey, name: "a", addr: testAddr("a")).signed(by: aIdentity)
        bInfo = MemberInfo(id: MemberID(raw: 2), node: bIdentity.publicKey, name: "b", addr: testAddr("b")).signed(by: bIdentity)
        a = SessionCore(local: aInfo, identity: aIdentity, joining: false, swimSeed: 1, journalSeed: 1)
        b = SessionCore(local: bInfo, identity: bIdentity, joining: false, swimSeed: 2, journalSeed: 2)
        if let storeLimit {
            var settings = CausalBroadcast.Settings()
            settings.storeLimitBytes = storeLimit
            a.broadcast = CausalBroadcast(local: aInfo.id, awaitingBaseline: false, settings: settings)
        }
        _ = a.receivePushPull(SWIMPushPull(join: false, members: [bInfo]), from: testAddr("b"), now: 1)
        _ = b.receivePushPull(SWIMPushPull(join: false, members: [aInfo]), from: testAddr("a"), now: 1)
        _ = b.receiveLink(a.linkUp(bInfo.id), from: aInfo.id, addr: testAddr("a"), now: 1)
        _ = a.receiveLink(b.linkUp(aInfo.id), from: bInfo.id, addr: testAddr("b"), now: 1)
        let keys = PairDatagramKeys(seed: [1, 2])
        a.installDatagramKeys(keys, for: bInfo.id, current: true, now: 1)
        b.installDatagramKeys(keys.reversed, for: aInfo.id, current: true, now: 1)
    }
}

/// The link messages in `effects` that would reach `peer` (sent to it alone or on every link).
private func linkMessages(_ effects: [SessionEffect], to peer: MemberID) -> [LinkMessage] {
    effects.compactMap {
        switch $0 {
        case let .sendLink(p, m) where p == peer: m
        case let .sendToLinks(m): m
        default: nil
        }
    }
}

private func delivered(_ effects: [SessionEffect]) -> [[UInt8]] {
    effects.compactMap { if case let .deliver(s) = $0 { s.message.body } else { nil } }
}

@Test func sendsAreBatchedSignedOnceAndDeliveredAtThePeer() throws {
    var p = Pair()
    let (first, e1) = try p.a.send(body: [1], to: nil, reliable: true)
    #expect(e1 == [.flushSoon, .deliverOwn(first)], "the first message of a batch asks for one flush; a broadcast is delivered here too")
    let (_, e2) = try p.a.send(body: [2], to: nil, reliable: true)
    #expect(!e2.contains(.flushSoon), "one flush per batch")
    #expect(p.a.hasPendingBatch)
    let flushed = p.a.flushBatch()
    let batches = linkMessages(flushed, to: p.bInfo.id)
    #expect(batches.count == 1)
    guard case let .batch(batch)? = batches.first else { Issue.record("no batch: \(flushed)"); return }
    #expect(batch.messages.count == 2 && !p.a.hasPendingBatch)
    #expect(p.a.broadcast.storedCount == 2, "kept for repair")
    let arrived = p.b.receiveLink(.batch(batch), from: p.aInfo.id, addr: testAddr("a"), now: 2)
    #expect(delivered(arrived) == [[1], [2]])
}

@Test func aBatchNotSignedByItsOriginIsCountedAsForgedAndDeliversNothing() throws {
    var p = Pair()
    _ = try p.a.send(body: [1], to: nil, reliable: true)
    guard case let .batch(batch)? = linkMessages(p.a.flushBatch(), to: p.bInfo.id).first else { Issue.record("no batch"); return }
    // The same messages signed by somebody else's key, still claiming a as origin.
    let forgedFlush = MessageBatch.sign(batch.messages.map(\.message), identity: Identity(seed: [UInt8](repeating: 9, count: 32)))
    let forged = try #require(SignedBatch(of: forgedFlush, for: p.aInfo.id))
    #expect(p.b.receiveLink(.batch(forged), from: p.aInfo.id, addr: testAddr("a"), now: 2) == [.forged(origin: p.aInfo.id, count: 1)])
    #expect(p.b.receiveLink(.message(forgedFlush[0]), from: p.aInfo.id, addr: testAddr("a"), now: 2) == [.forged(origin: p.aInfo.id, count: 1)])
    #expect(p.b.broadcast.delivered[p.aInfo.id, default: 0] == 0)
}

@Test func directedMessagesGoOnlyToTheirRecipientsLinks() throws {
    var p = Pair()
    let cIdentity = Identity(seed: [UInt8](repeating: 3, count: 32))
    let c = MemberInfo(id: MemberID(raw: 3), node: cIdentity.publicKey, name: "c", addr: testAddr("c")).signed(by: cIdentity)
    _ = p.a.receivePushPull(SWIMPushPull(join: false, members: [c]), from: testAddr("c"), now: 1)
    _ = p.a.linkUp(c.id)
    let (message, effects) = try p.a.send(body: [7], to: [p.bInfo.id], reliable: true)
    #expect(!effects.contains(.deliverOwn(message)), "not for this member")
    let flushed = p.a.flushBatch()
    #expect(flushed.allSatisfy { if case let .sendLink(peer, _) = $0 { peer == p.bInfo.id } else { false } }, "\(flushed)")
}

@Test func aClientsEnvelopeOfUpToOneKiBIsNotCountedAgainstTheReliableLimit() throws {
    var p = Pair()
    let allowance = SessionCore.envelopeAllowance
    _ = try p.a.send(body: [UInt8](repeating: 0, count: 64 * 1024 + allowance), envelope: allowance, to: nil, reliable: true)
    #expect(throws: CoreError.tooLarge(size: 64 * 1024 + 1, limit: 64 * 1024, reliable: true), "the payload beyond it counts") {
        _ = try p.a.send(body: [UInt8](repeating: 0, count: 64 * 1024 + 1 + allowance), envelope: allowance, to: nil, reliable: true)
    }
    #expect(throws: CoreError.tooLarge(size: 64 * 1024 + 1, limit: 64 * 1024, reliable: true), "only the allowance is free") {
        _ = try p.a.send(body: [UInt8](repeating: 0, count: 64 * 1024 + allowance + 1), envelope: allowance + 1, to: nil, reliable: true)
    }
    #expect(throws: CoreError.tooLarge(size: 1025, limit: 1024, reliable: false), "an unreliable body counts whole") {
        _ = try p.a.send(body: [UInt8](repeating: 0, count: 1025), envelope: 100, to: nil, reliable: false)
    }
}

@Test func sendsAreRefusedByLimitAndMembershipWithTheReason() {
    var p = Pair()
    #expect(throws: CoreError.tooLarge(size: 64 * 1024 + 1, limit: 64 * 1024, reliable: true)) {
        _ = try p.a.send(body: [UInt8](repeating: 0, count: 64 * 1024 + 1), to: nil, reliable: true)
    }
    #expect(throws: CoreError.tooLarge(size: 1025, limit: 1024, reliable: false)) {
        _ = try p.a.send(body: [UInt8](repeating: 0, count: 1025), to: nil, reliable: false)
    }
    #expect(throws: CoreError.unknownMember(MemberID(raw: 77))) {
        _ = try p.a.send(body: [1], to: [MemberID(raw: 77)], reliable: true)
    }
    _ = p.a.receive(SWIMMessage(sender: p.bInfo.id, kind: .gossip, gossip: [.left(p.bInfo.id, incarnation: 0, signature: Identity(seed: [UInt8](repeating: 2, count: 32)).sign(MembershipStatement.left(p.bInfo.id, incarnation: 0)))]), from: testAddr("b"), now: 2)
    #expect(throws: CoreError.notMember(p.bInfo.id)) {
        _ = try p.a.send(body: [1], to: [p.bInfo.id], reliable: true)
    }
}

@Test func anUnreliableSendIsOneDatagramPerLiveRecipient() throws {
    var p = Pair()
    let (message, effects) = try p.a.send(body: [5], to: nil, reliable: false)
    let payload = DatagramPayload(sender: p.aInfo.id, counter: 1, content: .message(message))
    #expect(effects == [.sendDatagram(payload, to: testAddr("b"), sealing: .link(p.bInfo.id, serial: 1)), .deliverUnreliable(message)])
    #expect(message.seq == 0)
}

@Test func fullRetransmitBuffersRefuseSendsUntilThePeerAcknowledges() throws {
    var p = Pair(storeLimit: 1000)
    var sent = 0
    while true {
        do {
            _ = try p.a.send(body: [UInt8](repeating: 1, count: 300), to: nil, reliable: true)
            sent += 1
            _ = p.a.flushBatch()
        } catch {
            #expect(error == .busy(storedBytes: p.a.broadcast.storedBytes))
            break
        }
    }
    #expect(sent == 3, "1000 bytes hold three 300-byte messages and their overhead")
    // b has everything and says so: a's buffers drain and the sends that waited are told.
    let digest = CausalBroadcast.Digest(delivered: [p.aInfo.id: UInt64(sent)], storedFrom: [:])
    let effects = p.a.receiveLink(.digest(digest, activity: nil), from: p.bInfo.id, addr: testAddr("b"), now: 2)
    #expect(effects.contains(.congestionCleared))
    #expect(!p.a.broadcast.isCongested)
    _ = try p.a.send(body: [1], to: nil, reliable: true)
}

@Test func aRepairRequestIsAnsweredFromTheStoreAndCounted() throws {
    var p = Pair()
    for body in [[1], [2], [3]] as [[UInt8]] { _ = try p.a.send(body: body, to: nil, reliable: true) }
    _ = p.a.flushBatch()
    let answer = p.a.receiveLink(.request(origin: p.aInfo.id, from: 2, to: 3), from: p.bInfo.id, addr: testAddr("b"), now: 2)
    let bodies = linkMessages(answer, to: p.bInfo.id).compactMap { if case let .message(s) = $0 { s.message.body } else { nil } }
    #expect(bodies == [[2], [3]])
    #expect(answer.last == .retransmitted(2))
    // Each repaired message verifies alone at the peer, by its proof.
    var delivered: [[UInt8]] = []
    for case let .message(s) in linkMessages(answer, to: p.bInfo.id) {
        delivered += HuddleCoreTests.delivered(p.b.receiveLink(.message(s), from: p.aInfo.id, addr: testAddr("a"), now: 2))
    }
    #expect(delivered.isEmpty, "held back: seq 1 is still missing at b")
}

@Test func anActivityRecordIsTakenOnlyWhenItsSetterSignedIt() throws {
    var p = Pair()
    let effects = p.a.setActivity(Array("{\"x\":1}".utf8), now: 1)
    #expect(effects.first == .activityChanged)
    guard case let .activity(record)? = linkMessages(effects, to: p.bInfo.id).first else { Issue.record("not sent: \(effects)"); return }
    #expect(p.b.receiveLink(.activity(record), from: p.aInfo.id, addr: testAddr("a"), now: 2) == [.activityChanged])
    #expect(p.b.activity.current == record)
    #expect(p.b.receiveLink(.activity(record), from: p.aInfo.id, addr: testAddr("a"), now: 2).isEmpty, "not newer")
    let forged = ActivityRecord.make(lamport: record.lamport + 1, setBy: p.aInfo.id, value: [1], identity: Identity(seed: [UInt8](repeating: 9, count: 32)))
    #expect(p.b.receiveLink(.activity(forged), from: p.aInfo.id, addr: testAddr("a"), now: 3) == [.forged(origin: p.aInfo.id, count: 1)])
    #expect(p.b.activity.current == record)
}

@Test func aJournalBroadcastIsAppliedAtThePeerWhenDelivered() throws {
    var p = Pair()
    let aIdentity = Identity(seed: [UInt8](repeating: 1, count: 32))
    var manifest = Manifest(name: "f", size: 10, chunkSize: 1 << 20, chunkHashes: [[UInt8](repeating: 4, count: 32)], meta: [],
                            uploader: p.aInfo.id, uploaderNodeKey: p.aInfo.node, signature: [])
    manifest.sign(with: aIdentity, key: [UInt8](repeating: 5, count: 32))
    let added = p.a.addAttachment(manifest, key: [UInt8](repeating: 5, count: 32), now: 2)
    #expect(added.contains(.journal(.emit(.added, id: manifest.id))))
    #expect(added.contains(.flushSoon))
    guard case let .batch(batch)? = linkMessages(p.a.flushBatch(), to: p.bInfo.id).first else { Issue.record("no batch"); return }
    let arrived = p.b.receiveLink(.batch(batch), from: p.aInfo.id, addr: testAddr("a"), now: 3)
    #expect(arrived.contains(.journal(.emit(.added, id: manifest.id))))
    #expect(delivered(arrived).isEmpty, "a journal entry is not an application message")
    #expect(p.b.journal.records[manifest.id] != nil)
    #expect(throws: CoreError.noSuchAttachment("nope")) { _ = try p.a.removeAttachment("nope", now: 4) }
}

@Test func chunkRequestsAndDamageReportsAreForwardedOnlyForChunksHeldHere() {
    var p = Pair()
    #expect(p.a.receiveLink(.chunkRequest(id: "x", index: 0), from: p.bInfo.id, addr: testAddr("b"), now: 2).isEmpty)
    #expect(p.a.receiveLink(.chunkCorrupt(id: "x", index: 0), from: p.bInfo.id, addr: testAddr("b"), now: 2).isEmpty)
}

/// Issue 33, item 1: an activity time is bounded by the wall clock (a hybrid logical clock). A
/// hostile member's record at the largest time a peer decodes used to win for ever, and the next
/// honest set, one more, was undecodable and cut its setter off. Now a record more than
/// `maximumSkew` ahead of the receiver's clock is refused until the clock reaches it, and an
/// honest set made after that wins everywhere.
@Test func anActivityTimeFarAheadOfTheWallClockIsRefusedAndAnHonestSetWins() throws {
    var p = Pair()
    let wall = 1_800_000_000.0
    p.a.setWallClock(wall, now: 1)
    p.b.setWallClock(wall, now: 1)
    let mallory = Identity.generate()
    // b knows mallory as a member.
    let malloryInfo = MemberInfo(id: MemberID(raw: 0xFFFF_FFFF_FFFF), node: mallory.publicKey, name: "m", addr: "127.0.0.1:9").signed(by: mallory)
    _ = p.a.receivePushPull(SWIMPushPull(join: false, members: [malloryInfo]), from: testAddr("m"), now: 1)
    _ = p.b.receivePushPull(SWIMPushPull(join: false, members: [malloryInfo]), from: testAddr("m"), now: 1)
    let atTheCap = ActivityRecord.make(lamport: WireReader.madeCountLimit, setBy: malloryInfo.id, value: [1], identity: mallory)
    #expect(p.a.receiveLink(.activity(atTheCap), from: malloryInfo.id, addr: testAddr("m"), now: 2) == [.refused(.activityAhead)])
    #expect(p.a.activity.current == nil)
    // The most mallory can get in: a time just under the skew bound. An honest set once the
    // clock passes it wins, and every peer decodes and takes it.
    let ahead = ActivityRecord.make(lamport: ActivityRegister.ticks(wall + ActivityRegister.maximumSkew) - 1, setBy: malloryInfo.id, value: [2], identity: mallory)
    #expect(p.a.receiveLink(.activity(ahead), from: malloryInfo.id, addr: testAddr("m"), now: 1) == [.activityChanged])
    #expect(p.b.receiveLink(.activity(ahead), from: malloryInfo.id, addr: testAddr("m"), now: 1) == [.activityChanged])
    let honest = p.a.setActivity([3], now: 2)
    guard case let .activity(record)? = linkMessages(honest, to: p.bInfo.id).first else { Issue.record("not sent: \(honest)"); return }
    #expect(record.lamport > ahead.lamport)
    let decoded = try LinkMessage.decode(LinkMessage.activity(record).encoded())
    #expect(p.b.receiveLink(decoded, from: p.aInfo.id, addr: testAddr("a"), now: 2) == [.activityChanged])
    #expect(p.a.activity.current?.value == [3] && p.b.activity.current?.value == [3])
}

@Test func aResumedCoreContinuesItsSeqsAndUsesNoMessageIdTwice() throws {
    var pair = Pair()
    let (first, _) = try pair.a.send(body: [1], to: nil, reliable: true)
    let (unreliable, _) = try pair.a.send(body: [2], to: [pair.bInfo.id], reliable: false)
    // What a crash right after these sends leaves: a point committed before the unreliable one.
    var point = pair.a.resumePoint
    point.counter = first.counter
    let aIdentity = Identity(seed: [UInt8](repeating: 1, count: 32))
    var again = SessionCore(local: pair.aInfo, identity: aIdentity, joining: false, swimSeed: 3, journalSeed: 3)
    again.resume(from: point, ownMessages: [])
    let (next, _) = try again.send(body: [3], to: nil, reliable: true)
    #expect(next.seq == first.seq + 1, "broadcast seqs go on after the committed one")
    let (directed, _) = try again.send(body: [4], to: nil, reliable: false)
    #expect(next.counter > unreliable.counter && directed.counter > unreliable.counter, "no message id of the earlier run is used again")
}

/// The digests `effects` send to `peer` alone (early digests, `progressDigests`).
private func earlyDigests(_ effects: [SessionEffect], to peer: MemberID) -> [CausalBroadcast.Digest] {
    effects.compactMap { if case let .sendLink(p, .digest(d, _)) = $0, p == peer { d } else { nil } }
}

/// Sends `count` broadcasts of 64 KiB from a and hands b every link message they make; b's effects.
private func stream(_ p: inout Pair, count: Int, now: Double) throws -> [SessionEffect] {
    var out: [SessionEffect] = []
    for _ in 0..<count {
        let (_, sent) = try p.a.send(body: [UInt8](repeating: 7, count: 64 * 1024), to: nil, reliable: true)
        for message in linkMessages(sent + p.a.flushBatch(), to: p.bInfo.id) {
            out += p.b.receiveLink(message, from: p.aInfo.id, addr: testAddr("a"), now: now)
        }
    }
    return out
}

@Test func aMemberThatDeliveredASixteenthOfTheStoreLimitOfOneOriginTellsThatOriginAtOnceAtMostOncePerGap() throws {
    var p = Pair()
    let perMessage = 64 * 1024
    let below = p.b.progressDigestBytes / perMessage - 1
    #expect(below >= 1 && p.b.progressDigestBytes % perMessage == 0)
    // Below the threshold: only the periodic digest acknowledges.
    var effects = try stream(&p, count: below, now: 2)
    #expect(delivered(effects).count == below)
    #expect(earlyDigests(effects, to: p.aInfo.id).isEmpty, "\(below * perMessage) bytes delivered is not yet due")
    // The message that reaches it: one digest to the origin, saying everything delivered so far.
    effects = try stream(&p, count: 1, now: 2)
    let early = earlyDigests(effects, to: p.aInfo.id)
    #expect(early.count == 1)
    #expect(early.first?.delivered[p.aInfo.id] == UInt64(below + 1))
    #expect(!effects.contains { if case .sendToLinks = $0 { true } else { false } }, "to the origin alone")
    // Another threshold's worth within the gap: none; past the gap, the next delivery sends one.
    effects = try stream(&p, count: below + 1, now: 2 + SessionCore.progressDigestGap / 2)
    #expect(earlyDigests(effects, to: p.aInfo.id).isEmpty, "at most one per gap")
    effects = try stream(&p, count: 1, now: 2 + SessionCore.progressDigestGap)
    #expect(earlyDigests(effects, to: p.aInfo.id).first?.delivered[p.aInfo.id] == UInt64(2 * below + 3))
    // The origin, told, drops what every member now has.
    let stored = p.a.broadcast.storedCount
    #expect(stored == 2 * below + 3)
    for digest in earlyDigests(effects, to: p.aInfo.id) {
        _ = p.a.receiveLink(.digest(digest, activity: p.b.activity.stamp), from: p.bInfo.id, addr: testAddr("b"), now: 3)
    }
    #expect(p.a.broadcast.storedCount == 0, "acknowledged by b, the only other member: \(p.a.broadcast.storedCount) still stored")
}

@Test func aPeriodicDigestStartsTheCountAgainAndAnUnlinkedOriginIsSentNothing() throws {
    var p = Pair()
    let perMessage = 64 * 1024
    let below = p.b.progressDigestBytes / perMessage - 1
    _ = try stream(&p, count: below, now: 2)
    let periodic = p.b.tick(now: 2.5)
    #expect(periodic.contains { if case .sendToLinks(.digest) = $0 { true } else { false } }, "\(periodic)")
    var effects = try stream(&p, count: 1, now: 2.5)
    #expect(earlyDigests(effects, to: p.aInfo.id).isEmpty, "the periodic digest acknowledged the first \(below)")
    _ = p.b.linkDown(p.aInfo.id, settled: false, now: 2.6)
    effects = try stream(&p, count: below + 1, now: 3)
    #expect(delivered(effects).count == below + 1)
    #expect(earlyDigests(effects, to: p.aInfo.id).isEmpty, "no link to the origin: nothing to send on")
}

@Test func retentionForFailedMembersGivesWayWellBeforeSendsWait() {
    let settings = CausalBroadcast.Settings()
    #expect(settings.retainBytes * 2 <= settings.storeLimitBytes, "retention (and a laggard's hold) is dropped before the store is full")
}
