import HuddleCrypto
import Testing
@testable import HuddleCore

/// Pure tests of issue 33, item 5: a catch-up and a push-pull go in parts within the link's message
/// limit, member records are bounded, and addresses from peers are numeric.

/// Member `raw`, its record signed by its own node key, with a `name` of `nameBytes` bytes.
private func member(_ raw: UInt64, nameBytes: Int = 8) -> (info: MemberInfo, identity: Identity) {
    var seed = [UInt8](repeating: 0, count: 32)
    for i in 0..<8 { seed[i] = UInt8(truncatingIfNeeded: raw >> (8 * UInt64(i))) }
    seed[31] = 0x5A
    let identity = Identity(seed: seed)
    let name = String(repeating: "n", count: nameBytes)
    return (MemberInfo(id: MemberID(raw: raw), node: identity.publicKey, name: name, addr: testAddr("m\(raw)")).signed(by: identity), identity)
}

/// A link as the node's reader sees it: each message cut into records, joined again by a
/// reassembler that refuses a message above `LinkMessage.maximumSize` (the node closes the link
/// then), and decoded.
private struct Link {
    var reader = LinkReassembler(limit: LinkMessage.maximumSize)
    mutating func carry(_ message: LinkMessage) throws -> LinkMessage {
        var whole: [UInt8]?
        for record in LinkRecords.split(message.encoded()) { whole = try reader.add(record) }
        guard let whole else { throw CoreError("the message did not end") }
        return try LinkMessage.decode(whole)
    }
}

/// An attachment of `uploader` whose journal entry is about 125 KB (3,400 chunk hashes of 1 KiB
/// chunks and the largest meta), within what a member accepts (`SessionCore.maximumJournalBody`).
private func largeAttachment(_ i: Int, by uploader: MemberInfo, _ identity: Identity) -> (Manifest, key: [UInt8]) {
    let chunks = 3_400
    let key = [UInt8](repeating: UInt8(i + 1), count: 32)
    var m = Manifest(name: "large-\(i)", size: UInt64(chunks * 1024), chunkSize: 1024,
                     chunkHashes: (0..<chunks).map { [UInt8](repeating: UInt8(truncatingIfNeeded: $0 &+ i), count: 32) },
                     meta: [UInt8](repeating: UInt8(ascii: "x"), count: Manifest.maximumMeta), uploader: uploader.id, uploaderNodeKey: uploader.node, signature: [])
    m.sign(with: identity, key: key)
    return (m, key)
}

private func sentTo(_ peer: MemberID, _ effects: [SessionEffect]) -> [LinkMessage] {
    effects.compactMap { if case let .sendLink(to, message) = $0, to == peer { message } else { nil } }
}

@Test func aJoinerLearnsEveryAttachmentOfAJournalLargerThanOneLinkMessage() throws {
    let (sponsorInfo, sponsorIdentity) = member(21)
    let (joinerInfo, joinerIdentity) = member(22)
    var sponsor = SessionCore(local: sponsorInfo, identity: sponsorIdentity, joining: false, swimSeed: 1, journalSeed: 1)
    var joiner = SessionCore(local: joinerInfo, identity: joinerIdentity, joining: true, swimSeed: 2, journalSeed: 2)
    var ids: Set<String> = []
    for i in 0..<10 {
        let (manifest, key) = largeAttachment(i, by: sponsorInfo, sponsorIdentity)
        let size = JournalEntry.add(manifest, key: key).encoded().count
        #expect(size > 120_000 && size <= SessionCore.maximumJournalBody)
        _ = sponsor.addAttachment(manifest, key: key, now: 1)
        ids.insert(manifest.id)
    }
    // Ten entries of ~125 KB: more than one link message may carry.
    #expect(sponsor.journal.entries.reduce(0) { $0 + $1.encoded().count } > LinkMessage.maximumSize)

    var link = Link()
    var answers: [LinkMessage] = []
    for request in joiner.pushPullRequest(to: sponsorInfo.id, join: true) {
        answers += sentTo(joinerInfo.id, sponsor.receiveLink(try link.carry(request), from: joinerInfo.id, addr: joinerInfo.addr, now: 2))
    }
    let journalParts = answers.filter { if case .journal = $0 { true } else { false } }
    #expect(journalParts.count >= 2, "the journal goes in parts")
    #expect(answers.allSatisfy { $0.encoded().count <= LinkMessage.partBytes })
    for answer in answers {
        _ = joiner.receiveLink(try link.carry(answer), from: sponsorInfo.id, addr: sponsorInfo.addr, now: 3)
    }
    #expect(Set(joiner.journal.records.keys) == ids, "the joiner learns every attachment")
    #expect(!joiner.catchUpFrom.contains(sponsorInfo.id), "the catch-up ended with the reply")
    #expect(joiner.refusals[.unsolicitedCatchUp] == 0)
}

@Test func aPushPullReplyLargerThanOneLinkMessageGoesInPartsAndTheCatchUpLastsUntilTheLastPart() throws {
    var limits = SessionCore.Limits()
    limits.members = 4096
    let (sponsorInfo, sponsorIdentity) = member(1)
    let (joinerInfo, joinerIdentity) = member(2)
    var sponsor = SessionCore(local: sponsorInfo, identity: sponsorIdentity, limits: limits, joining: false, swimSeed: 1, journalSeed: 1)
    var joiner = SessionCore(local: joinerInfo, identity: joinerIdentity, limits: limits, joining: true, swimSeed: 2, journalSeed: 2)
    // 760 members with names of the largest size: a state of about 300 KB, more than one part.
    // (At the former bound of 64 KiB per name, 17 such members passed the link's message limit.)
    let others = (100..<860).map { member(UInt64($0), nameBytes: MemberInfo.maximumName).info }
    _ = sponsor.receivePushPull(SWIMPushPull(join: false, members: others), from: testAddr("seed"), now: 1)
    #expect(sponsor.swim.members.count == others.count + 1)
    #expect(SWIMPushPull(join: true, members: sponsor.swim.pushPullState()).encode().count > LinkMessage.partBytes)

    var link = Link()
    var answers: [LinkMessage] = []
    for request in joiner.pushPullRequest(to: sponsorInfo.id, join: true) {
        answers += sentTo(joinerInfo.id, sponsor.receiveLink(try link.carry(request), from: joinerInfo.id, addr: joinerInfo.addr, now: 2))
    }
    let replies = answers.compactMap { if case let .pushPullReply(state) = $0 { state } else { nil } }
    #expect(replies.count >= 2, "the reply goes in parts")
    #expect(replies.dropLast().allSatisfy(\.more) && replies.last?.more == false)
    #expect(answers.allSatisfy { $0.encoded().count <= LinkMessage.partBytes })
    guard case .pushPullReply? = answers.last else { Issue.record("the reply's parts come last: \(answers.count)"); return }

    // Everything but the reply's last part: the catch-up is still open to the sponsor.
    for answer in answers.dropLast() {
        _ = joiner.receiveLink(try link.carry(answer), from: sponsorInfo.id, addr: sponsorInfo.addr, now: 3)
    }
    #expect(joiner.catchUpFrom.contains(sponsorInfo.id))
    let (early, earlyKey) = largeAttachment(1, by: sponsorInfo, sponsorIdentity)
    _ = joiner.receiveLink(.journal([.add(early, key: earlyKey)]), from: sponsorInfo.id, addr: sponsorInfo.addr, now: 3)
    #expect(joiner.journal.records[early.id] != nil, "a journal part before the reply's last part is taken")
    // The last part ends it: a journal part after it is refused.
    _ = joiner.receiveLink(try link.carry(answers[answers.count - 1]), from: sponsorInfo.id, addr: sponsorInfo.addr, now: 4)
    #expect(!joiner.catchUpFrom.contains(sponsorInfo.id))
    #expect(joiner.swim.members.count == others.count + 2, "the joiner learns every member")
    let (late, lateKey) = largeAttachment(2, by: sponsorInfo, sponsorIdentity)
    _ = joiner.receiveLink(.journal([.add(late, key: lateKey)]), from: sponsorInfo.id, addr: sponsorInfo.addr, now: 5)
    #expect(joiner.journal.records[late.id] == nil)
    #expect(joiner.refusals[.unsolicitedCatchUp] == 1)
}

@Test func aPushPullPartWithMoreToFollowIsMergedButNotAnswered() {
    let (sponsorInfo, sponsorIdentity) = member(1)
    let (joinerInfo, _) = member(2)
    var sponsor = SessionCore(local: sponsorInfo, identity: sponsorIdentity, joining: false, swimSeed: 1, journalSeed: 1)
    let first = sponsor.receiveLink(.pushPull(SWIMPushPull(join: true, members: [joinerInfo], more: true)), from: joinerInfo.id, addr: joinerInfo.addr, now: 1)
    #expect(sentTo(joinerInfo.id, first).isEmpty, "no catch-up and no reply before the last part")
    #expect(sponsor.swim.members[joinerInfo.id] != nil, "the part is merged")
    #expect(!SessionCore.refusesWhileBacklogged(.pushPull(SWIMPushPull(join: false, members: [], more: true))))
    let last = sponsor.receiveLink(.pushPull(SWIMPushPull(join: true, members: [])), from: joinerInfo.id, addr: joinerInfo.addr, now: 2)
    let sent = sentTo(joinerInfo.id, last)
    guard case .baseline? = sent.first, case let .pushPullReply(reply)? = sent.last else { Issue.record("\(sent)"); return }
    #expect(!reply.more && reply.members.contains { $0.id == joinerInfo.id })
}

@Test func theMoreFlagRoundTripsAndUnknownFlagsAreRefused() throws {
    let state = SWIMPushPull(join: true, members: [member(3).info], more: true)
    #expect(try SWIMPushPull.decode(state.encode()) == state)
    var bytes = state.encode()
    bytes[1] |= 4
    #expect(throws: CoreError.self) { try SWIMPushPull.decode(bytes) }
}

// MARK: member records

@Test func aMemberRecordWithANameOrAddressAboveItsBoundIsRefusedByTheDecoder() throws {
    let (ok, identity) = member(7, nameBytes: MemberInfo.maximumName)
    #expect(try MemberInfo.decode(ok.encoded()) == ok)
    var longName = ok
    longName.name += "n"
    #expect(throws: CoreError.self) { try MemberInfo.decode(longName.signed(by: identity).encoded()) }
    #expect(throws: CoreError.self) { try SWIMPushPull.decode(SWIMPushPull(join: false, members: [longName]).encode()) }
    var longAddr = ok
    longAddr.addr = "[0000:0000:0000:0000:0000:0000:0000:0001]:" + String(repeating: "0", count: 20) + "7400"
    #expect(longAddr.addr.utf8.count > MemberInfo.maximumAddress)
    #expect(throws: CoreError.self) { try MemberInfo.decode(longAddr.encoded()) }
}

@Test func thisMembersOwnNameAndAddressAreCheckedAgainstWhatPeersAccept() {
    #expect(MemberInfo.ownRecordProblem(name: String(repeating: "n", count: 256), addr: "10.1.2.3:7400") == nil)
    #expect(MemberInfo.ownRecordProblem(name: "a", addr: "[fd00::1]:7400") == nil)
    #expect(MemberInfo.ownRecordProblem(name: String(repeating: "n", count: 257), addr: "10.1.2.3:7400")?.contains("at most 256") == true)
    #expect(MemberInfo.ownRecordProblem(name: "a", addr: "node.example:7400")?.contains("not a numeric") == true)
    #expect(MemberInfo.ownRecordProblem(name: "a", addr: "[::1]:" + String(repeating: "0", count: 70) + "1")?.contains("at most 64") == true)
}

// MARK: numeric addresses

@Test func onlyNumericHostPortsAreNumeric() {
    for good in ["10.0.0.1:7400", "127.0.0.1:1", "[::1]:7400", "[fd00::1:2]:65535", "[::ffff:10.0.0.1]:9"] {
        #expect(HostPort.isNumeric(good), "\(good)")
    }
    for bad in ["localhost:7400", "node.example:7400", "10.0.0.1", "10.0.0.1:0", "10.0.0.1:65536", "::1:7400", "[::1]", "1.2.3:4",
                "[fe80::1%eth0]:7400", "10.0.0.1:x", ":7400", "[node.example]:1", "10.0.0.256:1"] {
        #expect(!HostPort.isNumeric(bad), "\(bad)")
    }
}

@Test func aRecordNamingAHostnameIsRefusedAndCounted() {
    let (meInfo, meIdentity) = member(1)
    var c = SessionCore(local: meInfo, identity: meIdentity, joining: false, swimSeed: 1, journalSeed: 1)
    let (other, otherIdentity) = member(2)
    var named = other
    named.addr = "node.example:7400"
    named = named.signed(by: otherIdentity)
    let effects = c.receivePushPull(SWIMPushPull(join: false, members: [named]), from: testAddr("seed"), now: 1)
    #expect(c.swim.members[other.id] == nil, "a record naming a hostname is not taken")
    #expect(c.refusals[.hostnameAddress] == 1)
    #expect(effects.contains(.refused(.hostnameAddress)))
    #expect(!effects.contains { if case .dial = $0 { true } else { false } })
    // The same member with a numeric address is taken.
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [other]), from: testAddr("seed"), now: 2)
    #expect(c.swim.members[other.id] != nil)
    // A link whose handshake record names a hostname is refused too.
    let (stranger, strangerIdentity) = member(3)
    var strangerNamed = stranger
    strangerNamed.addr = "stranger.example:7400"
    #expect(throws: CoreError.hostnameAddress) { try c.admitLink(strangerNamed.signed(by: strangerIdentity)) }
    #expect(c.refusals[.hostnameAddress] == 2)
}

@Test func aPingReqForAHostnameTargetSendsNothing() {
    var swim = SWIMInstance(local: member(1).info, settings: .lan, seed: 1, signer: UncheckedMembershipSigner())
    let target = member(2).info
    _ = swim.receivePushPull([target], join: false, from: testAddr("seed"), now: 0)
    let asked = swim.receive(SWIMMessage(sender: member(3).info.id, kind: .pingReq(seq: 1, target: target.id, targetAddr: "target.example:7400")),
                             from: testAddr("m3"), now: 1)
    #expect(!asked.contains { if case .send = $0 { true } else { false } }, "no ping to a hostname: \(asked)")
    #expect(swim.refusals[.hostnameAddress] == 1)
    let numeric = swim.receive(SWIMMessage(sender: member(3).info.id, kind: .pingReq(seq: 2, target: target.id, targetAddr: target.addr)),
                               from: testAddr("m3"), now: 1)
    #expect(numeric.contains { if case let .send(_, to) = $0 { to == target.addr } else { false } })
}

/// A ping-req is no reflector: a target this node does not know gets no ping, a known target is
/// pinged at the address of its own record whatever address the requester named, and relays
/// waiting at once are capped (the rest refused and counted).
@Test func aPingReqPingsOnlyAKnownMemberAtItsOwnAddressAndRelaysAreCapped() {
    var swim = SWIMInstance(local: member(1).info, settings: .lan, seed: 1, signer: UncheckedMembershipSigner())
    let target = member(2).info
    _ = swim.receivePushPull([target], join: false, from: testAddr("seed"), now: 0)
    func sends(_ effects: [SWIMEffect]) -> [String] { effects.compactMap { if case let .send(_, to) = $0 { to } else { nil } } }
    let stranger = swim.receive(SWIMMessage(sender: member(3).info.id, kind: .pingReq(seq: 1, target: member(9).info.id, targetAddr: testAddr("victim"))),
                                from: testAddr("m3"), now: 1)
    #expect(sends(stranger).isEmpty, "no ping for a member this node does not know: \(stranger)")
    let elsewhere = swim.receive(SWIMMessage(sender: member(3).info.id, kind: .pingReq(seq: 2, target: target.id, targetAddr: testAddr("victim"))),
                                 from: testAddr("m3"), now: 1)
    #expect(sends(elsewhere) == [target.addr], "the known member is pinged at its own address: \(sends(elsewhere))")
    var relayed = 1
    for seq in UInt32(3)..<UInt32(3 + SWIMInstance.maximumRelays + 10) {
        let effects = swim.receive(SWIMMessage(sender: member(3).info.id, kind: .pingReq(seq: seq, target: target.id, targetAddr: target.addr)),
                                   from: testAddr("m3"), now: 1)
        relayed += sends(effects).filter { $0 == target.addr }.count
    }
    #expect(relayed == SWIMInstance.maximumRelays, "relays waiting at once: \(relayed)")
    #expect(swim.refusals[.pingReqOverflow] == 11, "the 11 ping-reqs past the cap (1 + 266 asked, 256 relayed)")
}
