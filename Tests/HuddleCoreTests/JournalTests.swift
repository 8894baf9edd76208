import HuddleCrypto
import Testing
@testable import HuddleCore

/// Pure tests of the journal core: the attachment set, `have` bookkeeping, the state rule and the
/// hand-off plan, with injected time.
private let me = MemberID(raw: 1), p2 = MemberID(raw: 2), p3 = MemberID(raw: 3), uploader = MemberID(raw: 9)
private let uploaderIdentity = Identity.generate()

private func manifest(chunks: Int, from origin: MemberID = uploader, name: String = "f") -> Manifest {
    var m = Manifest(name: name, size: UInt64(chunks) * UInt64(Manifest.defaultChunkSize), chunkSize: UInt32(Manifest.defaultChunkSize),
                     chunkHashes: (0..<chunks).map { [UInt8](repeating: UInt8($0), count: 32) }, meta: [],
                     uploader: origin, uploaderNodeKey: uploaderIdentity.publicKey, signature: [])
    m.sign(with: uploaderIdentity, key: key)
    return m
}

private let key = [UInt8](repeating: 7, count: 32)

private func emitted(_ effects: [Journal.Effect]) -> [AttachmentChange] {
    effects.compactMap { if case let .emit(change, _) = $0 { change } else { nil } }
}

private func haves(_ effects: [Journal.Effect]) -> [MemberID] {
    effects.compactMap { if case let .sendHave(peer, _, _, _) = $0 { peer } else { nil } }
}

@Test func anAttachmentIsAddedOnceAndRemovedForGood() {
    var journal = Journal(local: me, seed: 1)
    let m = manifest(chunks: 3)
    #expect(emitted(journal.apply(.add(m, key: key), now: 0)) == [.added])
    #expect(journal.apply(.add(m, key: key), now: 1).isEmpty, "a second add of the same id is ignored")
    #expect(journal.apply(.add(manifest(chunks: 2, name: "short key"), key: [1]), now: 1).isEmpty, "a key that is not 32 bytes")
    var forged = manifest(chunks: 2, name: "forged")
    forged.signature[0] ^= 1
    #expect(journal.apply(.add(forged, key: key), now: 1).isEmpty, "a manifest whose signature fails")
    let other = manifest(chunks: 2, name: "another key")
    #expect(journal.apply(.add(other, key: [UInt8](repeating: 8, count: 32)), now: 1).isEmpty, "a key the manifest was not signed for")
    let removal = journal.apply(.remove(id: m.id), now: 2)
    #expect(removal.contains(.deleteStored(id: m.id)) && emitted(removal) == [.removed])
    #expect(journal.apply(.remove(id: m.id), now: 3).isEmpty)
    #expect(journal.apply(.add(m, key: key), now: 4).isEmpty, "a removed attachment does not come back")
    #expect(journal.state(of: m.id, now: 5) == .removed && journal.entries.isEmpty)
}

@Test func theUploaderIsCompleteAtOnceAndOthersReportProgressThenCompleteOnce() {
    var mine = Journal(local: uploader, seed: 1)
    let m = manifest(chunks: 3)
    #expect(emitted(mine.apply(.add(m, key: key), now: 0)) == [.added, .complete])

    var theirs = Journal(local: me, seed: 1)
    theirs.setPeers([me, uploader])
    _ = theirs.apply(.add(m, key: key), now: 0)
    var progress: [AttachmentChange] = []
    for (index, at) in [(0, 1.0), (1, 1.1)] {
        let fresh = theirs.chunkArrived(m.id, index, from: uploader, valid: true)
        #expect(fresh)
        progress += emitted(theirs.stored(m.id, now: at))
    }
    #expect(progress == [.progress], "at most one progress event per 0.25 s")
    let again = theirs.chunkArrived(m.id, 0, from: uploader, valid: true)
    #expect(!again, "a chunk held already is not stored again")
    let last = theirs.chunkArrived(m.id, 2, from: uploader, valid: true)
    #expect(last)
    #expect(emitted(theirs.stored(m.id, now: 1.2)) == [.complete])
    #expect(emitted(theirs.stored(m.id, now: 2)).isEmpty, "complete is emitted once")
}

@Test func aPeerHearsAHaveWhenItChangesAndAgainEverySecondOnlyWhileItFetches() {
    var journal = Journal(local: uploader, seed: 1)
    journal.setPeers([uploader, p2])
    let m = manifest(chunks: 2)
    _ = journal.apply(.add(m, key: key), now: 0)
    #expect(haves(journal.tick(now: 0, linked: [p2])) == [p2])
    #expect(haves(journal.tick(now: 0.5, linked: [p2])).isEmpty, "unchanged and within haveRefresh")
    #expect(haves(journal.tick(now: 1.0, linked: [p2])) == [p2], "repeated while p2 is still fetching")
    journal.receiveHave(p2, id: m.id, have: Bitfield(count: 2, full: true), offer: Bitfield(count: 2, full: true), now: 0)
    #expect(haves(journal.tick(now: 1.5, linked: [p2])).isEmpty)
    #expect(haves(journal.tick(now: 5, linked: [p2])).isEmpty, "never repeated to a complete holder")
    journal.linkDown(p2)
    #expect(haves(journal.tick(now: 5.1, linked: [p2])) == [p2], "a new link hears it again")
}

/// A peer's first `have` is answered at the next tick: the have this member sent it before it
/// knew the attachment was dropped there, and waiting `haveRefresh` for the repeat held it back.
@Test func aPeersFirstHaveIsAnsweredAtTheNextTickNotAfterTheRefresh() {
    var journal = Journal(local: me, seed: 1)
    journal.setPeers([me, uploader, p2, p3])
    let m = manifest(chunks: 2)
    _ = journal.apply(.add(m, key: key), now: 0)
    #expect(haves(journal.tick(now: 0, linked: [p2, p3])) == [p2, p3])
    // p2 learns of the attachment late (it dropped our have) and says it holds nothing.
    journal.receiveHave(p2, id: m.id, have: Bitfield(count: 2), offer: Bitfield(count: 2), now: 0)
    #expect(haves(journal.tick(now: 0.1, linked: [p2, p3])) == [p2], "answered at once, not at 1.0")
    journal.receiveHave(p2, id: m.id, have: Bitfield(count: 2), offer: Bitfield(count: 2), now: 0)
    #expect(haves(journal.tick(now: 0.2, linked: [p2, p3])).isEmpty, "only its first have is answered")
    // A complete peer needs nothing from us: its first have is not answered.
    journal.receiveHave(p3, id: m.id, have: Bitfield(count: 2, full: true), offer: Bitfield(count: 2, full: true), now: 0)
    #expect(haves(journal.tick(now: 0.3, linked: [p2, p3])).isEmpty)
}

@Test func theStateRuleIsReplicatedWithTwoHoldersAndUnavailableOnlyOnceSettled() {
    var journal = Journal(local: me, seed: 1)
    journal.setPeers([me, uploader, p2])
    let m = manifest(chunks: 2)
    _ = journal.apply(.add(m, key: key), now: 0)
    let full = Bitfield(count: 2, full: true)
    journal.receiveHave(p2, id: m.id, have: full, offer: full, now: 0)
    // Uploader (presumed complete) and p2 hold everything: replicated, emitted once.
    #expect(emitted(journal.tick(now: 0.1, linked: [uploader, p2])) == [.replicated])
    #expect(emitted(journal.tick(now: 0.2, linked: [uploader, p2])).isEmpty)
    // Both holders leave while p3, live, has not said what it holds: nobody is known to hold the
    // chunks, but the verdict waits until the swarm settles (3 s after the add).
    journal.setPeers([me, p3])
    #expect(journal.state(of: m.id, now: 0.3) == .announced)
    #expect(emitted(journal.tick(now: 1, linked: [p3])).isEmpty)
    #expect(emitted(journal.tick(now: 3.1, linked: [p3])) == [.unavailable])
    #expect(emitted(journal.tick(now: 4, linked: [p3])).isEmpty, "unavailable is emitted once")
    // With no live peer, nobody's word is known: the verdict waits for the settle time too (a
    // late joiner can learn of an attachment before its live peers reach the swarm).
    var alone = Journal(local: me, seed: 1)
    alone.setPeers([me])
    let orphan = manifest(chunks: 1, from: p2)
    _ = alone.apply(.add(orphan, key: key), now: 0)
    #expect(alone.state(of: orphan.id, now: 0) == .announced)
    #expect(alone.state(of: orphan.id, now: 3) == .unavailable)
    // A holder coming back makes it fetchable again.
    journal.setPeers([me, p2])
    journal.receiveHave(p2, id: m.id, have: full, offer: full, now: 0)
    #expect(journal.state(of: m.id, now: 5) == .announced)
}

@Test func theHandOffPlanPushesEachChunkOnlyThisMemberHoldsOnceRoundRobin() {
    var journal = Journal(local: uploader, seed: 1)
    journal.setPeers([uploader, p2, p3])
    let m = manifest(chunks: 5)
    _ = journal.apply(.add(m, key: key), now: 0)
    var p2Has = Bitfield(count: 5)
    p2Has[1] = true
    journal.receiveHave(p2, id: m.id, have: p2Has, offer: p2Has, now: 0)
    // p2 proved it holds chunk 1: it served this member a copy that verified.
    let stored = journal.chunkArrived(m.id, 1, from: p2, valid: true)
    #expect(!stored, "held here already: nothing to store")
    let (plan, effects) = journal.handOffPlan(to: [p3, p2])
    #expect(effects.isEmpty, "no chunk was only claimed elsewhere")
    #expect(plan.map(\.index) == [0, 2, 3, 4], "chunk 1 is held by p2 already")
    #expect(plan.map(\.peer) == [p2, p3, p2, p3], "round-robin over the peers in member order")
    let pushed = plan.map { (id: $0.id, index: $0.index) }
    #expect(journal.handedOff(pushed) == 0)
    var now = p2Has
    now[0] = true
    now[3] = true
    journal.receiveHave(p2, id: m.id, have: now, offer: now, now: 0)
    #expect(journal.handedOff(pushed) == 2, "chunks 0 and 3 are held elsewhere now")
    #expect(journal.handOffPlan(to: []).plan.isEmpty)
}
