import HuddleCrypto
import Testing
@testable import HuddleCore

// The session core's inputs the shell used to decide around (issue 35, item 1): a link's whole
// link-up (`linkEstablished`) and the attachment pipeline (`chunkArrived` … `chunkRead`).

private func member(_ n: UInt8, _ name: String) -> (Identity, MemberInfo) {
    let identity = Identity(seed: [UInt8](repeating: n, count: 32))
    return (identity, MemberInfo(id: MemberID(raw: UInt64(n)), node: identity.publicKey, name: name, addr: testAddr(name)).signed(by: identity))
}

private let (aIdentity, aInfo) = member(41, "a")
private let (bIdentity, bInfo) = member(42, "b")
private let (rIdentity, rInfo) = member(43, "r")

private func core(_ info: MemberInfo, _ identity: Identity, knowing others: [MemberInfo]) -> SessionCore {
    var c = SessionCore(local: info, identity: identity, joining: false, swimSeed: info.id.raw, journalSeed: info.id.raw)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: others), from: testAddr("seed"), now: 1)
    return c
}

private func keys(_ n: UInt8) -> PairDatagramKeys { PairDatagramKeys(seed: [UInt8](repeating: n, count: 32)) }

private func candidate(_ peer: MemberInfo, at c: SessionCore, dialer: MemberID, via: MemberID? = nil, n: UInt8 = 1) -> LinkCandidate {
    LinkCandidate(peer: peer, nodeKey: peer.node, keyHead: c.epochs.head, datagramKeys: keys(n), dialer: dialer, via: via, remote: peer.addr, local: c.swim.local.addr)
}

private func batches(_ effects: [SessionEffect]) -> [SignedBatch] {
    effects.compactMap { if case let .sendToLinks(.batch(b)) = $0 { b } else { nil } }
}

@Test func aLinkIsTakenUpInOrderAndOfTwoLinksTheOneDialedByTheLowerMemberStays() {
    var a = core(aInfo, aIdentity, knowing: [bInfo, rInfo])
    guard case let .admitted(replaces, before, hello, after) = a.linkEstablished(candidate(bInfo, at: a, dialer: bInfo.id), now: 2) else {
        Issue.record("the first link to b is not admitted")
        return
    }
    #expect(!replaces && before.isEmpty)
    #expect(hello == .hello(since: 0, nonApplication: 0), "the hello names the seq from which a knew b")
    #expect(after.contains { if case .member(.path, _) = $0 { true } else { false } }, "a direct link sets b's path")
    #expect(a.linkedLive == [bInfo.id])
    // A message waits in a's batch when r's link comes up: it goes out on the links that were up
    // (b's) before r's link is in the table, ahead of r's hello.
    _ = try? a.send(body: [1], to: nil, reliable: true)
    #expect(a.hasPendingBatch)
    guard case let .admitted(_, flushed, _, _) = a.linkEstablished(candidate(rInfo, at: a, dialer: rInfo.id, n: 9), now: 2) else {
        Issue.record("r's link is not admitted")
        return
    }
    #expect(batches(flushed).count == 1 && !a.hasPendingBatch, "the waiting batch is flushed before the link is in the table")
    // b dials back at once: a (41) < b (42), so the link a dialed wins at both ends.
    guard case .admitted(replaces: true, _, _, _) = a.linkEstablished(candidate(bInfo, at: a, dialer: aInfo.id, n: 2), now: 3) else {
        Issue.record("the link a dialed does not replace the one b dialed")
        return
    }
    guard case .duplicate = a.linkEstablished(candidate(bInfo, at: a, dialer: bInfo.id, n: 3), now: 4) else {
        Issue.record("a third link, dialed by b, is not refused as a duplicate")
        return
    }
    // A link over a relay never replaces a link that is up, and needs an open circuit.
    guard case .refused(.noCircuitForLink) = a.linkEstablished(candidate(bInfo, at: a, dialer: aInfo.id, via: rInfo.id, n: 4), now: 5) else {
        Issue.record("a relayed link without a circuit is taken")
        return
    }
    guard case .refused(.linkToSelf) = a.linkEstablished(candidate(aInfo, at: a, dialer: bInfo.id, n: 5), now: 5) else {
        Issue.record("a link to itself is taken")
        return
    }
    // Once the link is down, the next one is the first again.
    _ = a.linkDown(bInfo.id, settled: false, now: 6)
    guard case .admitted(replaces: false, _, _, _) = a.linkEstablished(candidate(bInfo, at: a, dialer: bInfo.id, n: 6), now: 7) else {
        Issue.record("a link after the last one closed is not admitted")
        return
    }
}

/// `a` uploads a two-chunk attachment; `b` learns it over their link. Returns both and the manifest.
private func uploaded() -> (a: SessionCore, b: SessionCore, manifest: Manifest) {
    var a = core(aInfo, aIdentity, knowing: [bInfo])
    var b = core(bInfo, bIdentity, knowing: [aInfo])
    let ab = a.linkEstablished(candidate(bInfo, at: a, dialer: aInfo.id), now: 1)
    let ba = b.linkEstablished(candidate(aInfo, at: b, dialer: aInfo.id), now: 1)
    if case let .admitted(_, _, hello, _) = ab { _ = b.receiveLink(hello, from: aInfo.id, addr: aInfo.addr, now: 1) } else { Issue.record("a refused b's link") }
    if case let .admitted(_, _, hello, _) = ba { _ = a.receiveLink(hello, from: bInfo.id, addr: bInfo.addr, now: 1) } else { Issue.record("b refused a's link") }
    let key = [UInt8](repeating: 9, count: 32)
    var manifest = Manifest(name: "f", size: UInt64(Manifest.defaultChunkSize + 10), chunkSize: UInt32(Manifest.defaultChunkSize),
                            chunkHashes: [[UInt8](repeating: 1, count: 32), [UInt8](repeating: 2, count: 32)], meta: [],
                            uploader: aInfo.id, uploaderNodeKey: aInfo.node, signature: [])
    manifest.sign(with: aIdentity, key: key)
    let sent = a.addAttachment(manifest, key: key, now: 2) + a.flushBatch()
    for batch in batches(sent) { _ = b.receiveLink(.batch(batch), from: aInfo.id, addr: aInfo.addr, now: 2) }
    return (a, b, manifest)
}

@Test func everyOutcomeOfAChunkArrivalIsDecidedByTheCore() {
    var (_, b, manifest) = uploaded()
    let id = manifest.id
    #expect(b.journal.records[id] != nil, "b learned the attachment")
    // A body that fails its hash: never stored, its sender told, another holder asked.
    let (corrupt, told) = b.chunkArrived(id: id, index: 0, hash: [UInt8](repeating: 7, count: 32), from: aInfo.id, now: 3)
    #expect(corrupt == .corrupt)
    #expect(told.contains(.sendLink(aInfo.id, .chunkCorrupt(id: id, index: 0))))
    // An index or an attachment it does not know: not even checked.
    #expect(b.chunkArrived(id: id, index: 2, hash: manifest.chunkHashes[0], from: aInfo.id, now: 3).0 == .unknown)
    #expect(b.chunkArrived(id: "nope", index: 0, hash: manifest.chunkHashes[0], from: aInfo.id, now: 3).0 == .unknown)
    // Intact and new: written; a second copy while it is written is dropped; held only once written.
    #expect(b.chunkArrived(id: id, index: 0, hash: manifest.chunkHashes[0], from: aInfo.id, now: 3).0 == .write(manifest))
    #expect(b.chunkArrived(id: id, index: 0, hash: manifest.chunkHashes[0], from: aInfo.id, now: 3).0 == .dropped)
    #expect(!b.journal.holds(id, 0), "a chunk being written is not served")
    #expect(b.chunkWritten(id: id, index: 0, from: aInfo.id, failed: false, now: 4).stored)
    #expect(b.journal.holds(id, 0))
    #expect(b.chunkArrived(id: id, index: 0, hash: manifest.chunkHashes[0], from: aInfo.id, now: 5).0 == .dropped, "held already")
    // A write that failed leaves the chunk to be fetched again.
    #expect(b.chunkArrived(id: id, index: 1, hash: manifest.chunkHashes[1], from: aInfo.id, now: 5).0 == .write(manifest))
    #expect(!b.chunkWritten(id: id, index: 1, from: aInfo.id, failed: true, now: 6).stored)
    #expect(!b.journal.holds(id, 1))
    // A write that ends after its attachment is gone: the file it may have made again goes.
    #expect(b.chunkWritten(id: "nope", index: 0, from: aInfo.id, failed: false, now: 6).effects.contains(.journal(.deleteStored(id: "nope"))))
}

@Test func everyChunkReadForAPeerEndsInTheCoreAndAMissingChunkIsFetchedAgain() {
    var (a, _, manifest) = uploaded()
    let id = manifest.id
    // b asks a for chunk 0 twice and chunk 1 once: each admitted read ends exactly once.
    for index in [0, 0, 1] { _ = a.receiveLink(.chunkRequest(id: id, index: UInt32(index)), from: bInfo.id, addr: bInfo.addr, now: 3) }
    #expect(a.journal.serves(to: bInfo.id) == 3)
    #expect(a.chunkRead(id: id, index: 0, found: true, for: bInfo.id, now: 4) == .send)
    #expect(a.chunkRead(id: id, index: 1, found: false, for: bInfo.id, now: 4) == .missing)
    #expect(!a.journal.holds(id, 1), "a chunk missing from the store is no longer held: it is fetched again")
    a.chunkServeDropped(to: bInfo.id)
    #expect(a.journal.serves(to: bInfo.id) == 0)
    // Damage found by a check of the stored copy: only chunks still held count.
    let (dropped, _) = a.chunksLost(id: id, [0, 1], now: 5)
    #expect(dropped == 1 && !a.journal.holds(id, 0))
    #expect(a.chunkRead(id: id, index: 0, found: true, for: bInfo.id, now: 6) == .notHeld)
}

@Test func aLinkWhoseRecordNamesAnotherNodeKeyThanItsHandshakeProvedIsRefusedAndCounted() {
    var a = core(aInfo, aIdentity, knowing: [bInfo, rInfo])
    // b's own record, replayed over a handshake that proved r's node key.
    var lie = candidate(bInfo, at: a, dialer: rInfo.id)
    lie.nodeKey = rInfo.node
    guard case let .refused(error) = a.linkEstablished(lie, now: 2) else {
        Issue.record("a link whose record names another node key than its handshake proved is admitted")
        return
    }
    #expect(error.code == .recordNamesAnotherNodeKey)
    #expect(a.refusals[.recordNodeKey] == 1 && a.linkedLive.isEmpty)
    // The same record over b's own handshake is admitted.
    guard case .admitted = a.linkEstablished(candidate(bInfo, at: a, dialer: bInfo.id), now: 3) else {
        Issue.record("b's own link is not admitted")
        return
    }
}

/// With a data directory the node holds a link-up's `before` (the waiting batch) for a commit but
/// sends the hello at once, so the batch reaches the new link too, after its hello, once the commit
/// is done (`sendToLinks` then covers it). What the peer does with it: a member that did not know
/// the sender's peer starts after the batch (nothing delivered); one it knew delivers each message
/// once, and a second copy nothing.
@Test func aWaitingBatchThatReachesTheNewLinkAfterItsHelloIsDeliveredAtMostOnce() {
    for knowsR in [false, true] {
        var a = core(aInfo, aIdentity, knowing: knowsR ? [bInfo, rInfo] : [bInfo])
        _ = a.linkEstablished(candidate(bInfo, at: a, dialer: bInfo.id), now: 2)
        _ = try? a.send(body: [7], to: nil, reliable: true)
        guard case let .admitted(_, before, hello, _) = a.linkEstablished(candidate(rInfo, at: a, dialer: rInfo.id, n: 9), now: 2),
              let batch = batches(before).first else {
            Issue.record("r's link is not admitted with the waiting batch in before")
            return
        }
        var r = core(rInfo, rIdentity, knowing: [aInfo])
        _ = r.linkEstablished(candidate(aInfo, at: r, dialer: rInfo.id, n: 9), now: 2)
        var delivered = r.receiveLink(hello, from: aInfo.id, addr: aInfo.addr, now: 2).count { if case .deliver = $0 { true } else { false } }
        for _ in 0..<2 {
            delivered += r.receiveLink(.batch(batch), from: aInfo.id, addr: aInfo.addr, now: 2).count { if case .deliver = $0 { true } else { false } }
        }
        #expect(delivered == (knowsR ? 1 : 0), "a \(knowsR ? "known" : "new") member delivered the held batch's message \(delivered) times")
    }
}
