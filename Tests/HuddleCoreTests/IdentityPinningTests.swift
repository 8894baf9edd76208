import HuddleCrypto
import Testing
@testable import HuddleCore

/// Pure tests of the rules that keep one member from speaking as another (issue 20, item 2): node
/// keys pinned at first sight, links admitted only for the key their handshake proved, catch-ups
/// only from the peer asked, and attachments only as their uploader announced them.
private let aIdentity = Identity(seed: [UInt8](repeating: 1, count: 32))
private let bIdentity = Identity(seed: [UInt8](repeating: 2, count: 32))
private let attacker = Identity(seed: [UInt8](repeating: 66, count: 32))
private let aInfo = MemberInfo(id: MemberID(raw: 1), node: aIdentity.publicKey, name: "a", addr: testAddr("a")).signed(by: aIdentity)
private let bInfo = MemberInfo(id: MemberID(raw: 2), node: bIdentity.publicKey, name: "b", addr: testAddr("b")).signed(by: bIdentity)
private let mallory = MemberInfo(id: MemberID(raw: 3), node: attacker.publicKey, name: "mallory", addr: testAddr("m")).signed(by: attacker)

private func core(_ info: MemberInfo, _ identity: Identity, joining: Bool = false, knowing others: [MemberInfo]) -> SessionCore {
    var c = SessionCore(local: info, identity: identity, joining: joining, swimSeed: info.id.raw, journalSeed: info.id.raw)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: others), from: testAddr("seed"), now: 1)
    return c
}

private func manifest(by uploader: MemberInfo, signedWith identity: Identity, key: [UInt8]) -> Manifest {
    var m = Manifest(name: "f", size: 10, chunkSize: 1 << 20, chunkHashes: [[UInt8](repeating: 4, count: 32)], meta: [],
                     uploader: uploader.id, uploaderNodeKey: uploader.node, signature: [])
    m.sign(with: identity, key: key)
    return m
}

@Test func aMembersNodeKeyIsPinnedAtFirstSight() {
    var b = core(bInfo, bIdentity, knowing: [aInfo])
    // Mallory gossips a's member id with her own node key and a higher incarnation.
    var takeover = aInfo
    takeover.node = attacker.publicKey
    takeover.incarnation = 7
    takeover.addr = testAddr("m")
    takeover = takeover.signed(by: attacker)
    let effects = b.receive(SWIMMessage(sender: mallory.id, kind: .gossip, gossip: [.alive(takeover)]), from: testAddr("m"), now: 2)
    #expect(effects == [.refused(.keyChange)], "refused, and the first of its reason reported")
    #expect(b.swim.members[aInfo.id]?.node == aIdentity.publicKey && b.swim.members[aInfo.id]?.addr == testAddr("a"))
    #expect(b.swim.refusedKeyChanges == 1)
    // The same through a push-pull.
    _ = b.receivePushPull(SWIMPushPull(join: false, members: [takeover]), from: testAddr("m"), now: 3)
    #expect(b.swim.members[aInfo.id]?.node == aIdentity.publicKey && b.swim.refusedKeyChanges == 2)
    // a itself may still change its address at a higher incarnation.
    var moved = aInfo
    moved.incarnation = 8
    moved.addr = testAddr("a", port: 2)
    moved = moved.signed(by: aIdentity)
    _ = b.receive(SWIMMessage(sender: aInfo.id, kind: .gossip, gossip: [.alive(moved)]), from: testAddr("a", port: 2), now: 4)
    #expect(b.swim.members[aInfo.id]?.addr == testAddr("a", port: 2))
}

@Test func aLinkIsAdmittedOnlyForTheNodeKeyItsHandshakeProved() throws {
    var b = core(bInfo, bIdentity, knowing: [aInfo])
    try b.admitLink(aInfo)
    var impostor = aInfo
    impostor.node = attacker.publicKey
    #expect(throws: CoreError.anotherNodeKey) { try b.admitLink(impostor) }
    #expect(throws: CoreError.linkToSelf) { try b.admitLink(bInfo) }
    try b.admitLink(mallory)  // a member not known yet: its key is pinned by what it says of itself
    _ = b.receive(SWIMMessage(sender: aInfo.id, kind: .gossip, gossip: [.left(aInfo.id, incarnation: 1, signature: aIdentity.sign(MembershipStatement.left(aInfo.id, incarnation: 1)))]), from: testAddr("a"), now: 2)
    #expect(throws: CoreError.peerLeft) { try b.admitLink(aInfo) }
}

@Test func aCatchUpIsTakenOnlyFromThePeerAskedAndOnlyUntilItsReply() {
    var joiner = core(bInfo, bIdentity, joining: true, knowing: [])
    let key = [UInt8](repeating: 9, count: 32)
    let entry = JournalEntry.add(manifest(by: aInfo, signedWith: aIdentity, key: key), key: key)
    // Nobody was asked: mallory's baseline and journal are refused.
    _ = joiner.receiveLink(.baseline([aInfo.id: 50], nonApplication: [:]), from: mallory.id, addr: testAddr("m"), now: 1)
    _ = joiner.receiveLink(.journal([entry]), from: mallory.id, addr: testAddr("m"), now: 1)
    #expect(joiner.broadcast.awaitingBaseline && joiner.journal.records.isEmpty)
    #expect(joiner.refusedLinkMessages == 2)
    // The joiner asks a (its sponsor): a's catch-up is taken, mallory's still is not.
    guard case .pushPull(let request)? = joiner.pushPullRequest(to: aInfo.id, join: true).first, request.join else {
        Issue.record("not a join push-pull"); return
    }
    _ = joiner.receiveLink(.baseline([aInfo.id: 50], nonApplication: [:]), from: mallory.id, addr: testAddr("m"), now: 2)
    #expect(joiner.broadcast.awaitingBaseline)
    _ = joiner.receiveLink(.baseline([aInfo.id: 3], nonApplication: [:]), from: aInfo.id, addr: testAddr("a"), now: 2)
    #expect(!joiner.broadcast.awaitingBaseline && joiner.broadcast.delivered[aInfo.id] == 3)
    _ = joiner.receiveLink(.journal([entry]), from: aInfo.id, addr: testAddr("a"), now: 2)
    #expect(joiner.journal.records.count == 1)
    // A second baseline, even from the sponsor, is refused: one is taken once, while awaited.
    _ = joiner.receiveLink(.baseline([aInfo.id: 40], nonApplication: [:]), from: aInfo.id, addr: testAddr("a"), now: 3)
    #expect(joiner.broadcast.delivered[aInfo.id] == 3)
    // After the sponsor's reply, its journal entries are refused too.
    _ = joiner.receiveLink(.pushPullReply(SWIMPushPull(join: true, members: [aInfo])), from: aInfo.id, addr: testAddr("a"), now: 4)
    let late = manifest(by: aInfo, signedWith: aIdentity, key: [UInt8](repeating: 8, count: 32))
    _ = joiner.receiveLink(.journal([.add(late, key: [UInt8](repeating: 8, count: 32))]), from: aInfo.id, addr: testAddr("a"), now: 5)
    #expect(joiner.journal.records[late.id] == nil)
}

@Test func aCatchUpRefusesAManifestNamingAnotherKeyForAKnownUploader() {
    var joiner = core(bInfo, bIdentity, joining: true, knowing: [aInfo])
    _ = joiner.pushPullRequest(to: aInfo.id, join: true)
    // Mallory's manifest claims a as uploader, signed with her own key (which it names).
    let key = [UInt8](repeating: 9, count: 32)
    var forged = Manifest(name: "f", size: 10, chunkSize: 1 << 20, chunkHashes: [[UInt8](repeating: 4, count: 32)], meta: [],
                          uploader: aInfo.id, uploaderNodeKey: attacker.publicKey, signature: [])
    forged.sign(with: attacker, key: key)
    #expect(forged.isValid(), "consistent in itself: only the pinned key shows the forgery")
    _ = joiner.receiveLink(.journal([.add(forged, key: key)]), from: aInfo.id, addr: testAddr("a"), now: 2)
    #expect(joiner.journal.records.isEmpty && joiner.refusedLinkMessages == 1)
}

@Test func anAttachmentBroadcastMustComeFromItsUploader() {
    var a = core(aInfo, aIdentity, knowing: [bInfo, mallory])
    var m = core(mallory, attacker, knowing: [aInfo, bInfo])
    _ = a.receiveLink(m.linkUp(aInfo.id), from: mallory.id, addr: testAddr("m"), now: 1)
    _ = m.receiveLink(a.linkUp(mallory.id), from: aInfo.id, addr: testAddr("a"), now: 1)
    // Mallory announces, in her own signed broadcast, a manifest b signed (b's attachment, her key).
    let key = [UInt8](repeating: 7, count: 32)
    let bs = manifest(by: bInfo, signedWith: bIdentity, key: key)
    let sent = m.addAttachment(bs, key: key, now: 2)
    #expect(sent.contains(.flushSoon))
    let flushed = m.flushBatch()
    guard case let .sendToLinks(.batch(batch))? = flushed.first(where: { if case .sendToLinks = $0 { true } else { false } }) else {
        Issue.record("no batch in \(flushed)"); return
    }
    let arrived = a.receiveLink(.batch(batch), from: mallory.id, addr: testAddr("m"), now: 2)
    #expect(a.journal.records[bs.id] == nil, "an add is announced by its uploader alone")
    #expect(arrived.contains(.refused(.journalNotByUploader)))
}

// MARK: signed membership records and claims

private func gossip(from sender: MemberInfo, _ updates: [SWIMGossip]) -> SWIMMessage {
    SWIMMessage(sender: sender.id, kind: .gossip, gossip: updates)
}

private func claim(_ failed: Bool, about member: MemberInfo, incarnation: UInt64? = nil, by claimer: MemberInfo, signedWith identity: Identity) -> SWIMGossip {
    let inc = incarnation ?? member.incarnation
    let signature = identity.sign(MembershipStatement.claim(failed: failed, about: member.id, incarnation: inc, by: claimer.id))
    return failed ? .failed(member.id, incarnation: inc, from: claimer.id, signature: signature)
                  : .suspect(member.id, incarnation: inc, from: claimer.id, signature: signature)
}

@Test func aRecordCountsOnlyWithItsMembersOwnSignature() {
    var b = core(bInfo, bIdentity, knowing: [aInfo, mallory])
    // A new member whose record is signed by another key than the one it names is not learned.
    let ghost = Identity(seed: [UInt8](repeating: 77, count: 32))
    var fake = MemberInfo(id: MemberID(raw: 9), node: ghost.publicKey, name: "ghost", addr: testAddr("g")).signed(by: attacker)
    #expect(b.receive(gossip(from: mallory, [.alive(fake)]), from: testAddr("m"), now: 2) == [.refused(.unsignedRecord)])
    #expect(b.swim.members[fake.id] == nil)
    fake.proof = []
    _ = b.receivePushPull(SWIMPushPull(join: false, members: [fake]), from: testAddr("m"), now: 2)
    #expect(b.swim.members[fake.id] == nil && b.refusals[.unsignedRecord] == 2)
    // A's record at a higher incarnation, moved to mallory's address, signed by mallory: refused.
    var moved = aInfo
    moved.incarnation = 5
    moved.addr = testAddr("m")
    moved.proof = attacker.sign(MembershipStatement.alive(moved))
    _ = b.receive(gossip(from: mallory, [.alive(moved)]), from: testAddr("m"), now: 3)
    #expect(b.swim.members[aInfo.id]?.addr == testAddr("a") && b.swim.members[aInfo.id]?.incarnation == 0)
    // A `left` for a signed by mallory does not evict a; a's own does.
    let forgedLeave = SWIMGossip.left(aInfo.id, incarnation: 1, signature: attacker.sign(MembershipStatement.left(aInfo.id, incarnation: 1)))
    _ = b.receive(gossip(from: mallory, [forgedLeave, .left(aInfo.id, incarnation: 2)]), from: testAddr("m"), now: 4)
    #expect(b.swim.members[aInfo.id]?.state == .alive && b.refusals[.unsignedRecord] == 5)
    let leave = SWIMGossip.left(aInfo.id, incarnation: 1, signature: aIdentity.sign(MembershipStatement.left(aInfo.id, incarnation: 1)))
    _ = b.receive(gossip(from: aInfo, [leave]), from: testAddr("a"), now: 5)
    #expect(b.swim.members[aInfo.id]?.state == .left)
}

@Test func aClaimCountsOnlySignedByAKnownClaimerAndNeverChangesTheRecord() {
    var b = core(bInfo, bIdentity, knowing: [aInfo, mallory])
    // Mallory claims a suspect in b's name, and with no signature at all: both refused.
    _ = b.receive(gossip(from: mallory, [claim(false, about: aInfo, by: bInfo, signedWith: attacker)]), from: testAddr("m"), now: 2)
    _ = b.receive(gossip(from: mallory, [.failed(aInfo.id, incarnation: 0, from: mallory.id)]), from: testAddr("m"), now: 2)
    #expect(b.swim.members[aInfo.id]?.state == .alive && b.refusals[.unsignedClaim] == 2)
    // A claim above the incarnation a signed is ignored: no record justifies it.
    _ = b.receive(gossip(from: mallory, [claim(true, about: aInfo, incarnation: 9, by: mallory, signedWith: attacker)]), from: testAddr("m"), now: 2)
    #expect(b.swim.members[aInfo.id]?.state == .alive && b.swim.members[aInfo.id]?.incarnation == 0)
    // Mallory's own signed suspicion counts (she is a member): the state changes, the record does not.
    _ = b.receive(gossip(from: mallory, [claim(false, about: aInfo, by: mallory, signedWith: attacker)]), from: testAddr("m"), now: 3)
    let held = b.swim.members[aInfo.id]
    #expect(held?.state == .suspect && held?.claim?.from == mallory.id)
    #expect(held?.incarnation == aInfo.incarnation && held?.proof == aInfo.proof && held?.addr == aInfo.addr)
    // The suspicion travels as mallory's signed claim, which a third member can check.
    var c = core(MemberInfo(id: MemberID(raw: 4), node: Identity(seed: [UInt8](repeating: 4, count: 32)).publicKey, name: "c", addr: testAddr("c")),
                 Identity(seed: [UInt8](repeating: 4, count: 32)), knowing: [aInfo, bInfo, mallory])
    var pushed = b.swim.pushPullState()
    pushed.removeAll { $0.id != aInfo.id }
    _ = c.receivePushPull(SWIMPushPull(join: false, members: pushed), from: testAddr("b"), now: 3)
    #expect(c.swim.members[aInfo.id]?.state == .alive, "a push-pull claim about a member held alive is left to c's own probes")
}

@Test func aClaimAboutThisMemberAboveItsIncarnationIsRefusedNotRefuted() {
    var a = core(aInfo, aIdentity, knowing: [bInfo, mallory])
    // Only a raises its incarnation: mallory's signed claim at 1,000 names a record that never was.
    _ = a.receive(gossip(from: mallory, [claim(false, about: aInfo, incarnation: 1000, by: mallory, signedWith: attacker)]), from: testAddr("m"), now: 2)
    #expect(a.swim.local.incarnation == 0 && a.refusals[.claimAboveIncarnation] == 1)
    // A forged claim at a's incarnation (signed by mallory in b's name) is refused too.
    _ = a.receive(gossip(from: mallory, [claim(false, about: aInfo, by: bInfo, signedWith: attacker)]), from: testAddr("m"), now: 2)
    #expect(a.swim.local.incarnation == 0 && a.refusals[.unsignedClaim] == 1)
    // b's real claim at a's incarnation is refuted with a signed record b believes.
    var b = core(bInfo, bIdentity, knowing: [aInfo, mallory])
    _ = a.receive(gossip(from: bInfo, [claim(false, about: aInfo, by: bInfo, signedWith: bIdentity)]), from: testAddr("b"), now: 3)
    #expect(a.swim.local.incarnation == 1)
    _ = b.receive(gossip(from: aInfo, [.alive(a.swim.local)]), from: testAddr("a"), now: 3)
    #expect(b.swim.members[aInfo.id]?.incarnation == 1 && b.swim.members[aInfo.id]?.proof == a.swim.local.proof)
}

@Test func linksFromPeersThatAreNotMembersAreBounded() throws {
    var b = core(bInfo, bIdentity, knowing: [aInfo])
    for i in 0..<SessionCore.strangerLinkLimit {
        let stranger = MemberInfo(id: MemberID(raw: 1000 + UInt64(i)), node: attacker.publicKey, name: "s", addr: testAddr("s"))
        try b.admitLink(stranger)
        _ = b.linkUp(stranger.id)
    }
    let one = MemberInfo(id: MemberID(raw: 5000), node: attacker.publicKey, name: "s", addr: testAddr("s"))
    #expect(throws: CoreError.tooManyStrangers) { try b.admitLink(one) }
    #expect(b.refusals[.strangerLinks] == 1)
    try b.admitLink(aInfo)  // a member is still admitted
    // A stranger that became a member (its push-pull arrived) no longer counts.
    _ = b.linkDown(MemberID(raw: 1000), settled: false, now: 2)
    try b.admitLink(one)
}
