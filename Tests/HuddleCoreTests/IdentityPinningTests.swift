import HuddleCrypto
import Testing
@testable import HuddleCore

/// Pure tests of the rules that keep one member from speaking as another (issue 20, item 2): node
/// keys pinned at first sight, links admitted only for the key their handshake proved, catch-ups
/// only from the peer asked, and attachments only as their uploader announced them.
private let aIdentity = Identity(seed: [UInt8](repeating: 1, count: 32))
private let bIdentity = Identity(seed: [UInt8](repeating: 2, count: 32))
private let attacker = Identity(seed: [UInt8](repeating: 66, count: 32))
private let aInfo = MemberInfo(id: MemberID(raw: 1), node: aIdentity.publicKey, name: "a", addr: "a:1").signed(by: aIdentity)
private let bInfo = MemberInfo(id: MemberID(raw: 2), node: bIdentity.publicKey, name: "b", addr: "b:1").signed(by: bIdentity)
private let mallory = MemberInfo(id: MemberID(raw: 3), node: attacker.publicKey, name: "mallory", addr: "m:1").signed(by: attacker)

private func core(_ info: MemberInfo, _ identity: Identity, joining: Bool = false, knowing others: [MemberInfo]) -> SessionCore {
    var c = SessionCore(local: info, identity: identity, joining: joining, swimSeed: info.id.raw, journalSeed: info.id.raw)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: others), from: "seed:1", now: 1)
    return c
}

private func manifest(by uploader: MemberInfo, signedWith identity: Identity, key: [UInt8]) -> Manifest {
    var m = Manifest(name: "f", size: 10, chunkSize: 1 << 20, chunkHashes: [[UInt8](repeating: 4, count: 32)], meta: [],
                     uploader: uploader.id, uploaderNode: uploader.node, signature: [])
    m.sign(with: identity, key: key)
    return m
}

@Test func aMembersNodeKeyIsPinnedAtFirstSight() {
    var b = core(bInfo, bIdentity, knowing: [aInfo])
    // Mallory gossips a's member id with her own node key and a higher incarnation.
    var takeover = aInfo
    takeover.node = attacker.publicKey
    takeover.incarnation = 7
    takeover.addr = "m:1"
    takeover = takeover.signed(by: attacker)
    let effects = b.receive(SWIMMessage(sender: mallory.id, kind: .gossip, gossip: [.alive(takeover)]), from: "m:1", now: 2)
    #expect(effects == [.refused(.keyChange)], "refused, and the first of its reason reported")
    #expect(b.swim.members[aInfo.id]?.node == aIdentity.publicKey && b.swim.members[aInfo.id]?.addr == "a:1")
    #expect(b.swim.refusedKeyChanges == 1)
    // The same through a push-pull.
    _ = b.receivePushPull(SWIMPushPull(join: false, members: [takeover]), from: "m:1", now: 3)
    #expect(b.swim.members[aInfo.id]?.node == aIdentity.publicKey && b.swim.refusedKeyChanges == 2)
    // a itself may still change its address at a higher incarnation.
    var moved = aInfo
    moved.incarnation = 8
    moved.addr = "a:2"
    moved = moved.signed(by: aIdentity)
    _ = b.receive(SWIMMessage(sender: aInfo.id, kind: .gossip, gossip: [.alive(moved)]), from: "a:2", now: 4)
    #expect(b.swim.members[aInfo.id]?.addr == "a:2")
}

@Test func aLinkIsAdmittedOnlyForTheNodeKeyItsHandshakeProved() throws {
    var b = core(bInfo, bIdentity, knowing: [aInfo])
    try b.admitLink(aInfo)
    var impostor = aInfo
    impostor.node = attacker.publicKey
    #expect(throws: SessionCore.LinkRefusal.anotherNodeKey) { try b.admitLink(impostor) }
    #expect(throws: SessionCore.LinkRefusal.ownID) { try b.admitLink(bInfo) }
    try b.admitLink(mallory)  // a member not known yet: its key is pinned by what it says of itself
    _ = b.receive(SWIMMessage(sender: aInfo.id, kind: .gossip, gossip: [.left(aInfo.id, incarnation: 1, signature: aIdentity.sign(MembershipStatement.left(aInfo.id, incarnation: 1)))]), from: "a:1", now: 2)
    #expect(throws: SessionCore.LinkRefusal.left) { try b.admitLink(aInfo) }
}

@Test func aCatchUpIsTakenOnlyFromThePeerAskedAndOnlyUntilItsReply() {
    var joiner = core(bInfo, bIdentity, joining: true, knowing: [])
    let key = [UInt8](repeating: 9, count: 32)
    let entry = JournalEntry.add(manifest(by: aInfo, signedWith: aIdentity, key: key), key: key)
    // Nobody was asked: mallory's baseline and journal are refused.
    _ = joiner.receiveLink(.baseline([aInfo.id: 50], nonApplication: [:]), from: mallory.id, addr: "m:1", now: 1)
    _ = joiner.receiveLink(.journal([entry]), from: mallory.id, addr: "m:1", now: 1)
    #expect(joiner.broadcast.awaitingBaseline && joiner.journal.records.isEmpty)
    #expect(joiner.refusedLinkMessages == 2)
    // The joiner asks a (its sponsor): a's catch-up is taken, mallory's still is not.
    guard case .pushPull(let request) = joiner.pushPullRequest(to: aInfo.id, join: true), request.join else {
        Issue.record("not a join push-pull"); return
    }
    _ = joiner.receiveLink(.baseline([aInfo.id: 50], nonApplication: [:]), from: mallory.id, addr: "m:1", now: 2)
    #expect(joiner.broadcast.awaitingBaseline)
    _ = joiner.receiveLink(.baseline([aInfo.id: 3], nonApplication: [:]), from: aInfo.id, addr: "a:1", now: 2)
    #expect(!joiner.broadcast.awaitingBaseline && joiner.broadcast.delivered[aInfo.id] == 3)
    _ = joiner.receiveLink(.journal([entry]), from: aInfo.id, addr: "a:1", now: 2)
    #expect(joiner.journal.records.count == 1)
    // A second baseline, even from the sponsor, is refused: one is taken once, while awaited.
    _ = joiner.receiveLink(.baseline([aInfo.id: 40], nonApplication: [:]), from: aInfo.id, addr: "a:1", now: 3)
    #expect(joiner.broadcast.delivered[aInfo.id] == 3)
    // After the sponsor's reply, its journal entries are refused too.
    _ = joiner.receiveLink(.pushPullReply(SWIMPushPull(join: true, members: [aInfo])), from: aInfo.id, addr: "a:1", now: 4)
    let late = manifest(by: aInfo, signedWith: aIdentity, key: [UInt8](repeating: 8, count: 32))
    _ = joiner.receiveLink(.journal([.add(late, key: [UInt8](repeating: 8, count: 32))]), from: aInfo.id, addr: "a:1", now: 5)
    #expect(joiner.journal.records[late.id] == nil)
}

@Test func aCatchUpRefusesAManifestNamingAnotherKeyForAKnownUploader() {
    var joiner = core(bInfo, bIdentity, joining: true, knowing: [aInfo])
    _ = joiner.pushPullRequest(to: aInfo.id, join: true)
    // Mallory's manifest claims a as uploader, signed with her own key (which it names).
    let key = [UInt8](repeating: 9, count: 32)
    var forged = Manifest(name: "f", size: 10, chunkSize: 1 << 20, chunkHashes: [[UInt8](repeating: 4, count: 32)], meta: [],
                          uploader: aInfo.id, uploaderNode: attacker.publicKey, signature: [])
    forged.sign(with: attacker, key: key)
    #expect(forged.isValid(), "consistent in itself: only the pinned key shows the forgery")
    _ = joiner.receiveLink(.journal([.add(forged, key: key)]), from: aInfo.id, addr: "a:1", now: 2)
    #expect(joiner.journal.records.isEmpty && joiner.refusedLinkMessages == 1)
}

@Test func anAttachmentBroadcastMustComeFromItsUploader() {
    var a = core(aInfo, aIdentity, knowing: [bInfo, mallory])
    var m = core(mallory, attacker, knowing: [aInfo, bInfo])
    _ = a.receiveLink(m.linkUp(aInfo.id), from: mallory.id, addr: "m:1", now: 1)
    _ = m.receiveLink(a.linkUp(mallory.id), from: aInfo.id, addr: "a:1", now: 1)
    // Mallory announces, in her own signed broadcast, a manifest b signed (b's attachment, her key).
    let key = [UInt8](repeating: 7, count: 32)
    let bs = manifest(by: bInfo, signedWith: bIdentity, key: key)
    let sent = m.addAttachment(bs, key: key, now: 2)
    #expect(sent.contains(.flushSoon))
    let flushed = m.flushBatch()
    guard case let .sendToLinks(.batch(batch))? = flushed.first(where: { if case .sendToLinks = $0 { true } else { false } }) else {
        Issue.record("no batch in \(flushed)"); return
    }
    let arrived = a.receiveLink(.batch(batch), from: mallory.id, addr: "m:1", now: 2)
    #expect(a.journal.records[bs.id] == nil, "an add is announced by its uploader alone")
    #expect(arrived.contains(.refused(.journalNotByUploader)))
}
