import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 20, item 4: every per-peer budget holds at its bound, what exceeds it is refused and
/// counted by reason, and honest traffic still flows.
private let a = MemberID(raw: 1), b = MemberID(raw: 2), c = MemberID(raw: 3)
private let identities = [a: Identity(seed: [UInt8](repeating: 1, count: 32)), b: Identity(seed: [UInt8](repeating: 2, count: 32)),
                          c: Identity(seed: [UInt8](repeating: 3, count: 32))]

private func signed(_ m: WireMessage) -> SignedMessage { MessageBatch.sign([m], identity: identities[m.origin]!)[0] }

private func delivered(_ effects: [CausalBroadcast.Effect]) -> [UInt64] {
    effects.compactMap { if case let .deliver(s) = $0 { s.message.seq } else { nil } }
}

private func info(_ id: MemberID) -> MemberInfo {
    MemberInfo(id: id, node: identities[id]!.publicKey, name: "\(id.raw)", addr: testAddr("m\(id.raw)")).signed(by: identities[id]!)
}

/// Two linked session cores, a (1) and b (2).
private func pair(limits: SessionCore.Limits = .init()) -> (a: SessionCore, b: SessionCore) {
    var x = SessionCore(local: info(a), identity: identities[a]!, limits: limits, joining: false, swimSeed: 1, journalSeed: 1)
    var y = SessionCore(local: info(b), identity: identities[b]!, limits: limits, joining: false, swimSeed: 2, journalSeed: 2)
    _ = x.receivePushPull(SWIMPushPull(join: false, members: [info(b)]), from: testAddr("m2"), now: 1)
    _ = y.receivePushPull(SWIMPushPull(join: false, members: [info(a)]), from: testAddr("m1"), now: 1)
    _ = y.receiveLink(x.linkUp(b), from: a, addr: testAddr("m1"), now: 1)
    _ = x.receiveLink(y.linkUp(a), from: b, addr: testAddr("m2"), now: 1)
    return (x, y)
}

// MARK: hold-back bytes per origin

@Test func theHoldBackOfOneOriginStaysWithinItsByteBudgetAndOthersStillDeliver() {
    let body = [UInt8](repeating: 7, count: 1000), size = 1000 + 128
    var settings = CausalBroadcast.Settings()
    settings.holdbackBytesPerOrigin = 10 * size
    var receiver = CausalBroadcast(local: b, awaitingBaseline: false, settings: settings)
    for o in [a, c] { _ = receiver.linkHello(origin: o, seq: 0) }
    _ = receiver.setMembers([a, b, c], now: 0)
    var origin = CausalBroadcast(local: a, awaitingBaseline: false)
    let messages = (1...30).map { _ in signed(origin.makeBroadcast(body: body)) }
    // Seq 1 is missing: everything after it waits. Only ten fit the budget.
    for m in messages[1...] { #expect(delivered(receiver.receive(m)).isEmpty) }
    #expect(receiver.heldBytes[a] == 10 * size, "exactly the budget is held")
    #expect(receiver.heldCount == 10)
    #expect(receiver.refusals[.heldBytes] == 19)
    // Another origin is not held back by a's budget.
    var other = CausalBroadcast(local: c, awaitingBaseline: false)
    #expect(delivered(receiver.receive(signed(other.makeBroadcast(body: body)))) == [1])
    // The next message in line is always taken; what it releases goes, and a lower seq that
    // arrives later (a repair) evicts the highest held one to fit.
    #expect(delivered(receiver.receive(messages[0])) == Array(1...11))
    #expect(receiver.heldBytes[a] == nil)
    for m in messages[12...21] { _ = receiver.receive(m) }  // seqs 13...22 held: the budget is full
    _ = receiver.receive(messages[11])  // seq 12 is next in line: 12...22 delivered
    #expect(receiver.delivered[a] == 22)
    for m in messages[23...29] { _ = receiver.receive(m) }  // 24...30 held (7)
    for m in messages[22...22] { _ = receiver.receive(m) }  // 23: next, releases all
    #expect(receiver.delivered[a] == 30, "every refused message was delivered once asked again")
    #expect(receiver.heldCount == 0)
}

@Test func aLowerSeqEvictsHigherHeldBroadcastsAndADirectedMessageEvictsBroadcasts() {
    let body = [UInt8](repeating: 1, count: 1000), size = 1128
    var settings = CausalBroadcast.Settings()
    settings.holdbackBytesPerOrigin = 3 * size
    var receiver = CausalBroadcast(local: b, awaitingBaseline: false, settings: settings)
    _ = receiver.linkHello(origin: a, seq: 0)
    _ = receiver.linkHello(origin: c, seq: 0)
    _ = receiver.setMembers([a, b, c], now: 0)
    var origin = CausalBroadcast(local: a, awaitingBaseline: false)
    let m = (1...6).map { _ in signed(origin.makeBroadcast(body: body)) }
    for x in m[3...5] { _ = receiver.receive(x) }  // 4, 5, 6 held
    _ = receiver.receive(m[2])  // 3 evicts 6
    #expect(receiver.heldCount == 3 && receiver.refusals[.heldBytes] == 1)
    // A directed message (no repair exists for it) depending on c's seq 1 takes a broadcast's place.
    var directed = origin.makeDirected(body: body, to: [b])
    directed.deps = [.init(member: c, seq: 1)]
    _ = receiver.receive(signed(directed))
    #expect(receiver.heldCount == 3, "one broadcast made room")
    #expect(receiver.heldBytes[a] == 3 * size)
    var other = CausalBroadcast(local: c, awaitingBaseline: false)
    let released = receiver.receive(signed(other.makeBroadcast(body: [9])))
    #expect(released.contains { if case let .deliver(s) = $0 { s.message.seq == 0 && s.message.origin == a } else { false } },
            "the directed message is delivered once its dependency is")
}

// MARK: body limit on receive

@Test func aBodyAboveTheReceiveLimitIsRefusedBeforeItIsHeldAndTheRestFlows() throws {
    var (x, y) = pair()
    let big = [UInt8](repeating: 1, count: 64 * 1024 + SessionCore.envelopeAllowance + 1)
    let oversized = signed(x.broadcast.makeDirected(body: big, to: [b]))
    let refused = y.receiveLink(.message(oversized), from: a, addr: testAddr("m1"), now: 2)
    #expect(refused.contains(.refused(.bodyTooLarge)), "the first is logged")
    #expect(y.refusals[.bodyTooLarge] == 1)
    let flush = MessageBatch.sign([x.broadcast.makeDirected(body: big, to: [b]), x.broadcast.makeDirected(body: big, to: [b])], identity: identities[a]!)
    let batch = try #require(SignedBatch(of: flush, for: b))
    #expect(!y.receiveLink(.batch(batch), from: a, addr: testAddr("m1"), now: 2).contains(.refused(.bodyTooLarge)), "only the first is logged")
    #expect(y.refusals[.bodyTooLarge] == 3)
    #expect(y.broadcast.heldCount == 0)
    // At the limit, a message goes through.
    let (_, sent) = try x.send(body: [UInt8](repeating: 2, count: 64 * 1024), to: nil, reliable: true)
    #expect(sent.contains(.flushSoon))
    var delivered = 0
    for case let .sendToLinks(message) in x.flushBatch() {
        for case .deliver in y.receiveLink(message, from: a, addr: testAddr("m1"), now: 3) { delivered += 1 }
    }
    #expect(delivered == 1)
}

// MARK: member table

@Test func theMemberTableStaysWithinItsLimitAndADownMemberMakesRoom() {
    var settings = SWIMSettings.lan
    settings.memberLimit = 4
    var swim = SWIMInstance(local: info(a), settings: settings, seed: 1, signer: UncheckedMembershipSigner())
    let fakes = (10..<20).map { MemberInfo(id: MemberID(raw: UInt64($0)), node: [UInt8](repeating: UInt8($0), count: 32), name: "fake", addr: testAddr("f", port: $0)) }
    let effects = swim.receivePushPull(fakes, join: false, from: testAddr("f", port: 10), now: 1)
    #expect(swim.members.count == 4, "self and three others")
    #expect(swim.refusals[.memberTableFull] == 7)
    #expect(effects.filter { if case .refused(.memberTableFull) = $0 { true } else { false } }.count == 1, "reported once")
    // A member that failed makes room for a new one.
    let known = swim.members.keys.filter { $0 != a }.sorted()
    // (Another member's claim only starts a suspicion: this member's own timer fails the member.)
    _ = swim.receive(SWIMMessage(sender: known[1], kind: .gossip, gossip: [.failed(known[0], incarnation: 0, from: known[1])]), from: testAddr("f", port: 11), now: 2)
    let failedAt = swim.suspicions[known[0]]?.deadline ?? 2
    _ = swim.tick(now: failedAt)
    #expect(swim.members[known[0]]?.state == .failed)
    _ = swim.receivePushPull([info(c)], join: false, from: testAddr("m3"), now: failedAt + 0.1)
    #expect(swim.members[c] != nil && swim.members[known[0]] == nil)
    #expect(swim.members.count == 4)
}

// MARK: chunk requests in flight, backlog, repair answers

private func heldAttachment(chunks: Int, local: MemberID, limit: Int = Journal.defaultStoreLimitBytes) -> (Journal, Manifest) {
    let identity = identities[local] ?? .generate()
    var m = Manifest(name: "f", size: UInt64(chunks * Manifest.defaultChunkSize), chunkSize: UInt32(Manifest.defaultChunkSize),
                     chunkHashes: (0..<chunks).map { [UInt8](repeating: UInt8($0), count: 32) }, meta: [],
                     uploader: local, uploaderNodeKey: identity.publicKey, signature: [])
    let key = [UInt8](repeating: 5, count: 32)
    m.sign(with: identity, key: key)
    var journal = Journal(local: local, seed: 1, storeLimitBytes: limit)
    journal.setPeers([local, b, c])
    _ = journal.apply(.add(m, key: key), now: 0)
    return (journal, m)
}

@Test func chunkReadsInFlightPerPeerAreBoundedAndFreedWhenServed() {
    var (journal, m) = heldAttachment(chunks: 40, local: a)
    for index in 0..<Journal.servesPerPeer { #expect(journal.admitServe(m.id, index, to: b).admitted) }
    let over = journal.admitServe(m.id, 20, to: b)
    #expect(!over.admitted && over.effects == [.refused(.chunkRequests)])
    #expect(journal.admitServe(m.id, 21, to: b).effects.isEmpty, "logged once, counted always")
    #expect(journal.refusals[.chunkRequests] == 2)
    #expect(journal.admitServe(m.id, 0, to: c).admitted, "another peer has its own budget")
    journal.served(m.id, 0, to: b, now: 1)
    #expect(journal.admitServe(m.id, 22, to: b).admitted, "a served chunk frees its slot")
    journal.linkDown(b)
    #expect(journal.serves(to: b) == 0)
    #expect(!journal.admitServe(m.id, 99, to: c).admitted, "a chunk not held is never served")
}

@Test func aBackloggedPeersRequestsForBulkAnswersAreRefusedAndTheRestIsHandled() throws {
    var (x, y) = pair()
    _ = try x.send(body: [1], to: nil, reliable: true)
    var batch: LinkMessage?
    for case let .sendToLinks(message) in x.flushBatch() { batch = message }
    let request = LinkMessage.request(origin: a, from: 1, to: 1)
    #expect(x.receiveLink(request, from: b, addr: testAddr("m2"), now: 2, backlogged: true) == [.refused(.outboxFull)])
    #expect(x.receiveLink(.chunkRequest(id: "x", index: 0), from: b, addr: testAddr("m2"), now: 2, backlogged: true).isEmpty, "counted, logged once")
    #expect(x.refusals[.outboxFull] == 2)
    #expect(x.receiveLink(request, from: b, addr: testAddr("m2"), now: 2).contains(.retransmitted(1)), "answered once the link drained")
    // A message from a backlogged peer is still taken.
    let got = y.receiveLink(try #require(batch), from: a, addr: testAddr("m1"), now: 2, backlogged: true)
    #expect(got.contains { if case .deliver = $0 { true } else { false } })
}

@Test func aRepairAnswerCarriesAtMostItsByteBudget() throws {
    var (x, _) = pair()
    for _ in 0..<100 {
        _ = try x.send(body: [UInt8](repeating: 3, count: 64 * 1024), to: nil, reliable: true)
        _ = x.flushBatch()
    }
    let answer = x.receiveLink(.request(origin: a, from: 1, to: 100), from: b, addr: testAddr("m2"), now: 2)
    let sent = answer.filter { if case .sendLink(_, .message) = $0 { true } else { false } }.count
    #expect(sent == SessionCore.repairAnswerBytes / (64 * 1024))
    #expect(answer.contains(.retransmitted(sent)))
}

// MARK: the store limit

/// Member a's journal with a store limit of `chunks` chunks, and c's six-chunk attachment in it.
private func storeLimitedJournal(chunks: Int) -> (journal: Journal, manifest: Manifest, chunk: Int) {
    let chunk = Manifest.defaultChunkSize + AEAD.tagLength
    let identity = identities[c]!
    var m = Manifest(name: "f", size: UInt64(6 * Manifest.defaultChunkSize), chunkSize: UInt32(Manifest.defaultChunkSize),
                     chunkHashes: (0..<6).map { [UInt8](repeating: UInt8($0), count: 32) }, meta: [], uploader: c, uploaderNodeKey: identity.publicKey, signature: [])
    let key = [UInt8](repeating: 5, count: 32)
    m.sign(with: identity, key: key)
    var journal = Journal(local: a, seed: 1, storeLimitBytes: chunks * chunk)
    journal.setPeers([a, b, c])
    _ = journal.apply(.add(m, key: key), now: 0)
    return (journal, m, chunk)
}

@Test func fetchingStopsAtTheStoreLimitWithOneReportAndUnaskedChunksMustFit() {
    let (start, m, chunk) = storeLimitedJournal(chunks: 2)
    var journal = start
    let all = Bitfield(count: 6, full: true)
    journal.receiveHave(b, id: m.id, have: all, offer: all, now: 0)
    journal.receiveHave(c, id: m.id, have: all, offer: all, now: 0)
    let first = journal.requests(now: 1)
    let asked = first.compactMap { if case let .requestChunk(_, _, index) = $0 { index } else { nil } }
    #expect(asked.count == 2, "two chunks fit")
    #expect(first.contains(.storeFull(id: m.id)) && first.contains(.refused(.storeFull)))
    #expect(journal.requests(now: 1.1).isEmpty, "reported once, nothing more asked")
    // An unasked chunk (a hand-off push) must fit too; an asked one is already counted.
    let unasked = (0..<6).first { !asked.contains($0) }!
    #expect(!journal.admitChunk(m.id, unasked, now: 2).admitted)
    #expect(journal.admitChunk(m.id, asked[0], now: 2).admitted)
    for index in asked { _ = journal.chunkArrived(m.id, index, from: b, valid: true) }
    #expect(journal.swarm.storedBytes == 2 * chunk)
    #expect(journal.requests(now: 10).filter { if case .requestChunk = $0 { true } else { false } }.isEmpty, "the store is full")
    #expect(journal.refusals[.storeFull] == 2)
}

/// Unasked chunks (a hand-off push) admitted while none of them is stored yet (a link stores
/// several at once) are counted together: the second one that would pass the limit is refused,
/// and an admitted one is not asked of anyone while it is written.
@Test func unaskedChunksBeingStoredAtOnceStayWithinTheStoreLimit() {
    let (start, m, chunk) = storeLimitedJournal(chunks: 1)
    var journal = start
    #expect(journal.admitChunk(m.id, 4, now: 1).admitted, "one unasked chunk fits")
    #expect(!journal.admitChunk(m.id, 5, now: 1).admitted, "a second one, while the first is written, does not")
    let all = Bitfield(count: 6, full: true)
    journal.receiveHave(b, id: m.id, have: all, offer: all, now: 0)
    let asked = journal.requests(now: 1.5).compactMap { if case let .requestChunk(_, _, index) = $0 { index } else { nil } }
    #expect(!asked.contains(4), "the chunk being written is not asked for")
    #expect(asked.isEmpty, "the store is spent")
    let stored = journal.chunkArrived(m.id, 4, from: b, valid: true)
    #expect(stored)
    #expect(journal.swarm.storedBytes == chunk && journal.swarm.requestedBytes == 0)
}

/// Asked chunks whose writes outlast the request timeout, and whose sender leaves meanwhile (a
/// loaded machine), still count until they are stored: no chunk is asked for in their place, a
/// late second copy of one is dropped, and the store never passes its limit.
@Test func slowWritesAndADepartedSenderNeverLetTheStorePassItsLimit() {
    let (start, m, chunk) = storeLimitedJournal(chunks: 3)
    var journal = start
    let all = Bitfield(count: 6, full: true)
    journal.receiveHave(b, id: m.id, have: all, offer: all, now: 0)
    let asked = journal.requests(now: 1).compactMap { if case let .requestChunk(_, _, index) = $0 { index } else { nil } }
    #expect(asked.count == 3, "three chunks fit")
    for index in asked { #expect(journal.admitChunk(m.id, index, now: 2).admitted) }
    #expect(journal.swarm.requestedBytes == 3 * chunk, "a chunk being written counts once, not also by its request")
    #expect(!journal.admitChunk(m.id, asked[0], now: 2).admitted, "a second copy of a chunk being written is dropped")
    // The writes take longer than the request timeout, and b leaves while they run.
    journal.setPeers([a, c])
    journal.receiveHave(c, id: m.id, have: all, offer: all, now: 0)
    let later = journal.requests(now: 1 + 3 * journal.swarm.settings.requestTimeout)
    #expect(later.filter { if case .requestChunk = $0 { true } else { false } }.isEmpty, "nothing is asked for in their place")
    #expect(journal.swarm.requestedBytes == 3 * chunk)
    for index in asked {
        let stored = journal.chunkArrived(m.id, index, from: b, valid: true)
        #expect(stored)
    }
    #expect(journal.swarm.storedBytes == 3 * chunk && journal.swarm.requestedBytes == 0)
    let unasked = (0..<6).first { !asked.contains($0) }!
    #expect(!journal.admitChunk(m.id, unasked, now: 2).admitted, "the store is full")
}

// MARK: holders only after a verified serve


@Test func aFakeHaveNeverSparesAChunkItsHandOff() {
    var (journal, m) = heldAttachment(chunks: 4, local: a)
    let all = Bitfield(count: 4, full: true)
    journal.receiveHave(b, id: m.id, have: all, offer: all, now: 0)  // b claims everything, proves nothing
    let (plan, effects) = journal.handOffPlan(to: [b, c])
    #expect(plan.map(\.index) == [0, 1, 2, 3], "every chunk is handed off")
    #expect(effects == [.refused(.unverifiedHolder)] && journal.refusals[.unverifiedHolder] == 4)
    // c serves chunk 2 intact and says it holds it: that copy counts.
    journal.receiveHave(c, id: m.id, have: Bitfield(count: 4, full: true), offer: all, now: 0)
    _ = journal.chunkArrived(m.id, 2, from: c, valid: true)
    #expect(journal.handOffPlan(to: [b, c]).plan.map(\.index) == [0, 1, 3])
    // A copy that failed its hash proves nothing.
    _ = journal.chunkArrived(m.id, 1, from: b, valid: false)
    #expect(journal.handOffPlan(to: [b, c]).plan.map(\.index) == [0, 1, 3])
    #expect(journal.state(of: m.id, now: 10) == .replicated, "the state still follows what peers say")
}

/// One store budget for what this member fetches and what it adds (`Journal.storeFits`, which
/// `attach.add` asks through `SessionCore.storeFits(attachmentOf:)`): chunks asked for count against it as soon as
/// they are asked for, an own attachment as soon as it is added, and nothing fits past the limit.
@Test func whatThisMemberAddsIsHeldToTheStoreBudgetFetchingIsHeldTo() {
    let (start, m, chunk) = storeLimitedJournal(chunks: 4)
    var journal = start
    #expect(journal.storeUsedBytes == 0)
    #expect(journal.storeFits(4 * chunk) && !journal.storeFits(4 * chunk + 1) && !journal.storeFits(-1))
    let all = Bitfield(count: 6, full: true)
    journal.receiveHave(c, id: m.id, have: all, offer: all, now: 0)
    let asked = journal.requests(now: 1).count { if case .requestChunk = $0 { true } else { false } }
    #expect(asked > 0 && journal.storeUsedBytes == asked * chunk, "asked-for chunks count at once")
    #expect(!journal.storeFits((4 - asked) * chunk + 1) && journal.storeFits((4 - asked) * chunk))
    // This member's own attachment of one chunk: held in full, so it counts too.
    let (own, _) = heldAttachment(chunks: 1, local: a, limit: 4 * chunk)
    #expect(own.storeUsedBytes > 0 && own.storeUsedBytes <= chunk)
    #expect(!own.storeFits(4 * chunk), "what it added leaves less room")
}

/// `attach.add`'s question: an attachment is counted as the journal will count it once added, each
/// chunk sealed (a byte past a whole chunk takes a whole sealed chunk).
@Test func anAttachmentThisMemberAddsIsCountedAsItsSealedChunks() {
    let identity = identities[a]!
    let me = MemberInfo(id: a, node: identity.publicKey, name: "a", addr: testAddr("a"), incarnation: 0).signed(by: identity)
    var limits = SessionCore.Limits()
    limits.storeBytes = 2 * (Manifest.defaultChunkSize + AEAD.tagLength)
    let core = SessionCore(local: me, identity: identity, limits: limits, joining: false, swimSeed: 1, journalSeed: 1)
    #expect(core.storeFits(attachmentOf: 0) && core.storeFits(attachmentOf: 2 * Manifest.defaultChunkSize))
    #expect(!core.storeFits(attachmentOf: 2 * Manifest.defaultChunkSize + 1), "a third chunk does not fit")
    #expect(!core.storeFits(attachmentOf: -1) && !core.storeFits(attachmentOf: .max), "no trap on any size")
}
