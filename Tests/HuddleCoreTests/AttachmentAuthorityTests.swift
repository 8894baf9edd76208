import HuddleCrypto
import Testing
@testable import HuddleCore

// Only the uploader or an admin removes an attachment (issue 33, item 3).

/// Member `n` named `name`: its identity (seeded by `n`) and its signed record.
private func member(_ n: UInt8, _ name: String) -> (Identity, MemberInfo) {
    let identity = Identity(seed: [UInt8](repeating: n, count: 32))
    return (identity, MemberInfo(id: MemberID(raw: UInt64(n)), node: identity.publicKey, name: name, addr: testAddr(name)).signed(by: identity))
}

private let (aIdentity, aInfo) = member(31, "a")
private let (bIdentity, bInfo) = member(32, "b")
private let (malloryIdentity, mallory) = member(33, "m")

/// Three members that know each other; `admins` is the admin set of the session key each one
/// holds (the admin set is part of the key, issue 33: a member holding another set is in another
/// session, and only a hostile one speaking to the others directly, as here, reaches them).
private struct Trio {
    var a: SessionCore, b: SessionCore, m: SessionCore

    init(admins: [MemberID: [[UInt8]]] = [:]) {
        func core(_ info: MemberInfo, _ identity: Identity, _ others: [MemberInfo]) -> SessionCore {
            let key = try? SessionKey(bytes: [UInt8](repeating: 7, count: 32), admins: admins[info.id] ?? [])
            var c = SessionCore(local: info, identity: identity, joining: false, swimSeed: info.id.raw, journalSeed: info.id.raw, sessionKey: key)
            _ = c.receivePushPull(SWIMPushPull(join: false, members: others), from: testAddr("seed"), now: 1)
            return c
        }
        a = core(aInfo, aIdentity, [bInfo, mallory])
        b = core(bInfo, bIdentity, [aInfo, mallory])
        m = core(mallory, malloryIdentity, [aInfo, bInfo])
        func link(_ x: inout SessionCore, _ y: inout SessionCore, _ xInfo: MemberInfo, _ yInfo: MemberInfo) {
            _ = x.receiveLink(y.linkUp(xInfo.id), from: yInfo.id, addr: yInfo.addr, now: 1)
            _ = y.receiveLink(x.linkUp(yInfo.id), from: xInfo.id, addr: xInfo.addr, now: 1)
        }
        link(&a, &b, aInfo, bInfo)
        link(&a, &m, aInfo, mallory)
        link(&b, &m, bInfo, mallory)
    }

    /// What `from` flushed, delivered to the two others (as the batch each link would carry).
    mutating func deliver(from sender: MemberID, _ effects: [SessionEffect], now: Double) -> [MemberID: [SessionEffect]] {
        var out: [MemberID: [SessionEffect]] = [:]
        let flushed: [SessionEffect]
        switch sender {
        case aInfo.id: flushed = a.flushBatch()
        case bInfo.id: flushed = b.flushBatch()
        default: flushed = m.flushBatch()
        }
        let batches = (effects + flushed).compactMap { effect -> SignedBatch? in
            switch effect {
            case let .sendToLinks(.batch(batch)), let .sendLink(_, .batch(batch)): batch
            default: nil
            }
        }
        for batch in batches {
            let addr = sender == aInfo.id ? testAddr("a") : sender == bInfo.id ? testAddr("b") : testAddr("m")
            if sender != aInfo.id { out[aInfo.id, default: []] += a.receiveLink(.batch(batch), from: sender, addr: addr, now: now) }
            if sender != bInfo.id { out[bInfo.id, default: []] += b.receiveLink(.batch(batch), from: sender, addr: addr, now: now) }
            if sender != mallory.id { out[mallory.id, default: []] += m.receiveLink(.batch(batch), from: sender, addr: addr, now: now) }
        }
        return out
    }

    /// a adds an attachment, delivered to b and mallory; its id.
    mutating func aAddsAnAttachment(_ n: UInt8) -> String {
        let key = [UInt8](repeating: n, count: 32)
        var manifest = Manifest(name: "f\(n)", size: 10, chunkSize: 1 << 20, chunkHashes: [[UInt8](repeating: n, count: 32)], meta: [],
                                uploader: aInfo.id, uploaderNodeKey: aInfo.node, signature: [])
        manifest.sign(with: aIdentity, key: key)
        _ = deliver(from: aInfo.id, a.addAttachment(manifest, key: key, now: 2), now: 2)
        return manifest.id
    }

    func removed(_ id: String) -> [Bool] {
        [a, b, m].map { $0.journal.records[id]?.removed ?? false }
    }
}

@Test func aRemoveByAMemberThatNeitherUploadedNorIsAnAdminIsRefusedEverywhere() throws {
    // Mallory's key names her an admin (an edited admin list); the session's does not.
    var t = Trio(admins: [mallory.id: [mallory.node]])
    let id = t.aAddsAnAttachment(1)
    #expect(t.removed(id) == [false, false, false])
    let sent = try t.m.removeAttachment(id, now: 3)
    let arrived = t.deliver(from: mallory.id, sent, now: 3)
    #expect(t.a.journal.records[id]?.removed == false && t.b.journal.records[id]?.removed == false, "the attachment stays at a and b")
    #expect(t.a.refusals[.journalRemoveNotAllowed] == 1 && t.b.refusals[.journalRemoveNotAllowed] == 1)
    #expect(arrived[aInfo.id]?.contains(.refused(.journalRemoveNotAllowed)) == true)
    #expect(arrived[aInfo.id]?.contains(.journal(.emit(.removed, id: id))) == false)
}

@Test func theUploaderOrAnAdminRemovesAnAttachment() throws {
    var t = Trio(admins: [aInfo.id: [bInfo.node], bInfo.id: [bInfo.node], mallory.id: [bInfo.node]])
    let first = t.aAddsAnAttachment(1), second = t.aAddsAnAttachment(2)
    _ = t.deliver(from: aInfo.id, try t.a.removeAttachment(first, now: 3), now: 3)
    #expect(t.removed(first) == [true, true, true], "the uploader's remove counts everywhere")
    _ = t.deliver(from: bInfo.id, try t.b.removeAttachment(second, now: 4), now: 4)
    #expect(t.removed(second) == [true, true, true], "an admin's remove counts everywhere")
    #expect(t.a.refusals[.journalRemoveNotAllowed] == 0 && t.m.refusals[.journalRemoveNotAllowed] == 0)
}

@Test func thisMemberAskingToRemoveAnotherMembersAttachmentIsRefusedAndNothingIsSent() throws {
    var t = Trio()
    let id = t.aAddsAnAttachment(1)
    #expect(throws: CoreError.notUploaderOrAdmin(id)) { _ = try t.b.removeAttachment(id, now: 3) }
    #expect(!t.b.hasPendingBatch && t.b.journal.records[id]?.removed == false)
    #expect(throws: CoreError.noSuchAttachment("nope")) { _ = try t.a.removeAttachment("nope", now: 3) }
}

@Test func aCatchUpCarriesNoRemovals() {
    var t = Trio()
    let id = t.aAddsAnAttachment(1)
    _ = t.b.pushPullRequest(to: mallory.id, join: true)
    _ = t.b.receiveLink(.journal([.remove(id: id)]), from: mallory.id, addr: testAddr("m"), now: 3)
    #expect(t.b.journal.records[id]?.removed == false && t.b.refusals[.journalRemoveNotAllowed] == 1)
}
