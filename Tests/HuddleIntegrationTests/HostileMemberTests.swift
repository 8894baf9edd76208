import Foundation
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import Testing

/// Issue 20, item 6: real nodes against an adversary that holds the session key and attacks them
/// with our own codec (`AdversaryLink`). For each attack: no honest node crashes or is misled, and
/// the refusal is counted in `stats.refused`.

/// `node`'s record of `member`, from `members`.
private func record(of member: String, at node: TestNode) async throws -> JSONObject? {
    try await node.request("members")["members"]?.arrayValue?.compactMap(\.objectValue).first { $0["member"]?.stringValue == member }
}

/// How many refusals of `reason` `node` counted.
private func refused(_ reason: Refusal, at node: TestNode) async throws -> Int64 {
    try await node.request("stats")["refused"]?.objectValue?[reason.rawValue]?.intValue ?? 0
}

/// Mallory: a key holder with a node key of her own, linked to `node` and known to it as a member
/// (her own signed record, sent in a push-pull). She never answers probes: she has seconds before
/// `node` fails her, which is all each attack below needs.
private struct Mallory {
    let identity = Identity.generate()
    let info: MemberInfo
    let link: AdversaryLink

    init(linkedTo node: TestNode, key: String) async throws {
        let id = MemberID(raw: UInt64.random(in: 1...(1 << 52)))
        info = MemberInfo(id: id, node: identity.publicKey, name: "mallory", addr: "127.0.0.1:9").signed(by: identity)
        link = try AdversaryLink(addr: node.addr, key: try SessionKey.load(from: key), identity: identity, info: info)
        try link.write(.pushPull(SWIMPushPull(join: false, members: [info])))
        let mallory = id.description
        try await eventually("\(node.name) to know mallory") { try await record(of: mallory, at: node) != nil }
    }

    /// A claim by mallory (or, signed by her, in `claimer`'s name) that `member` is suspect or failed.
    func claim(failed: Bool, about member: MemberID, incarnation: UInt64, inNameOf claimer: MemberID? = nil) -> SWIMGossip {
        let from = claimer ?? info.id
        let signature = identity.sign(MembershipStatement.claim(failed: failed, about: member, incarnation: incarnation, by: from))
        return failed ? .failed(member, incarnation: incarnation, from: from, signature: signature)
                      : .suspect(member, incarnation: incarnation, from: from, signature: signature)
    }

    func gossip(_ updates: [SWIMGossip]) throws {
        try link.write(.swim(SWIMMessage(sender: info.id, kind: .gossip, gossip: updates)))
    }
}

@Suite("Hostile members (real nodes)", .timeLimit(.minutes(10)))
struct HostileMemberTests {
    @Test func forgedMembershipRecordsNeitherEvictReplaceNorSuspectAMember() async throws {
        let cluster = try TestCluster("hostile-records")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let events = try await EventCollector.subscribe(a, topics: ["members", "messages"])
        guard let aID = MemberID(a.member), let bID = MemberID(b.member),
              let bRecord = try await record(of: b.member, at: a),
              let bNode = bRecord["node"]?.stringValue, let bIncarnation = bRecord["incarnation"]?.intValue
        else { Issue.record("no record of b at a"); return }
        let mallory = try await Mallory(linkedTo: a, key: cluster.key)
        let before = (key: try await refused(.keyChange, at: a), record: try await refused(.unsignedRecord, at: a),
                      claim: try await refused(.unsignedClaim, at: a), above: try await refused(.claimAboveIncarnation, at: a))

        // b's id with mallory's node key (signed by her): a key replacement.
        let takeover = MemberInfo(id: bID, node: mallory.identity.publicKey, name: "b", addr: "127.0.0.1:9", incarnation: 5).signed(by: mallory.identity)
        // b's own key, moved to mallory's address, signed by mallory.
        var moved = MemberInfo(id: bID, node: bytesFromHex(bNode) ?? [], name: "b", addr: "127.0.0.1:9", incarnation: 5)
        moved.proof = mallory.identity.sign(MembershipStatement.alive(moved))
        // b leaving, in mallory's signature.
        let leave = SWIMGossip.left(bID, incarnation: 6, signature: mallory.identity.sign(MembershipStatement.left(bID, incarnation: 6)))
        // a failing b, in mallory's signature; a suspected far above its own incarnation.
        let failed = mallory.claim(failed: true, about: bID, incarnation: UInt64(bIncarnation), inNameOf: aID)
        let aboveA = mallory.claim(failed: false, about: aID, incarnation: 1000)
        // A member nobody is: its record signed by no key.
        let ghost = MemberInfo(id: MemberID(raw: 0x6057), node: Identity.generate().publicKey, name: "ghost", addr: "127.0.0.1:9")
        try mallory.gossip([.alive(takeover), .alive(moved), leave, failed, aboveA, .alive(ghost)])

        try await eventually("a to count every refusal") {
            let keyChanges = try await refused(.keyChange, at: a), records = try await refused(.unsignedRecord, at: a)
            let claims = try await refused(.unsignedClaim, at: a), above = try await refused(.claimAboveIncarnation, at: a)
            return keyChanges > before.key && records >= before.record + 3 && claims > before.claim && above > before.above
        }
        let held = try await record(of: b.member, at: a)
        #expect(held?["state"]?.stringValue == "alive" && held?["node"]?.stringValue == bNode && held?["addr"]?.stringValue == b.addr)
        #expect(try await record(of: MemberID(raw: 0x6057).description, at: a) == nil, "the unsigned member was not learned")
        #expect((try await record(of: a.member, at: b))?["incarnation"]?.intValue ?? .max < 1000, "a did not refute a forged claim")
        // b is still a member to a: its message arrives; a never reported it left or failed.
        _ = try await b.request("send", ["text": "still here"])
        try await eventually("b's message at a") { await events.messages().contains { $0["text"]?.stringValue == "still here" } }
        let aboutB = await events.events.filter { $0["event"]?.stringValue == "member" && $0["member"]?.objectValue?["member"]?.stringValue == b.member }
        #expect(!aboutB.contains { ["left", "failed", "suspect"].contains($0["change"]?.stringValue ?? "") }, "\(aboutB)")
        #expect(a.process.isRunning && b.process.isRunning)
        await events.stop()
    }

    /// Members invented by the hundred, each with a node key of its own and a record it signed (a
    /// key holder can make as many as it likes): the table holds at most `--max-members`, the rest
    /// are refused and counted, and the honest members stay.
    @Test func invitedMembersByTheHundredStayWithinTheMemberTable() async throws {
        let cluster = try TestCluster("hostile-fakes")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a", extra: ["--max-members", "32"])
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let mallory = try await Mallory(linkedTo: a, key: cluster.key)
        let fakes = (0..<200).map { i -> MemberInfo in
            let identity = Identity.generate()
            return MemberInfo(id: MemberID(raw: 0xFA4E_0000 + UInt64(i)), node: identity.publicKey, name: "fake\(i)", addr: "127.0.0.1:9").signed(by: identity)
        }
        try mallory.link.write(.pushPull(SWIMPushPull(join: false, members: fakes)))
        try await eventually("a to refuse members beyond its table") { try await refused(.memberTableFull, at: a) > 0 }
        let members = try await a.request("members")["members"]?.arrayValue ?? []
        #expect(members.count <= 32, "a holds \(members.count) members")
        #expect(members.contains { $0.objectValue?["member"]?.stringValue == b.member }, "b is still a member")
        _ = try await b.request("send", ["text": "still heard"])
        try await eventually("a to deliver b's message") { (try await a.request("stats")["messages_delivered"]?.intValue ?? 0) >= 1 }
        #expect(a.process.isRunning)
    }

    @Test func aCatchUpNobodyAskedForIsRefusedAndAReplayedDirectedMessageIsDeliveredOnce() async throws {
        let cluster = try TestCluster("hostile-state")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let events = try await EventCollector.subscribe(a, topics: ["messages"])
        guard let aID = MemberID(a.member), let bID = MemberID(b.member) else { Issue.record("bad member ids"); return }
        let mallory = try await Mallory(linkedTo: a, key: cluster.key)
        let before = try await refused(.unsolicitedCatchUp, at: a)

        // A baseline that would skip b's first 50 broadcasts, and a journal with mallory's attachment.
        let key = [UInt8](repeating: 7, count: 32)
        var manifest = Manifest(name: "x", size: 1, chunkSize: UInt32(Manifest.defaultChunkSize), chunkHashes: [[UInt8](repeating: 1, count: 32)],
                                meta: [], uploader: mallory.info.id, uploaderNode: mallory.identity.publicKey, signature: [])
        manifest.sign(with: mallory.identity, key: key)
        try mallory.link.write(.baseline([bID: 50], nonApplication: [:]))
        try mallory.link.write(.journal([.add(manifest, key: key)]))
        // Mallory's own directed message to a, written three times.
        let once = MessageBatch.sign([WireMessage(from: mallory.info.id, counter: 1, seq: 0, to: [aID], body: Array("once".utf8))], identity: mallory.identity)
        let marker = MessageBatch.sign([WireMessage(from: mallory.info.id, counter: 2, seq: 0, to: [aID], body: Array("marker".utf8))], identity: mallory.identity)
        for _ in 0..<3 { try mallory.link.write(.message(once[0])) }
        try mallory.link.write(.message(marker[0]))

        try await eventually("a to refuse both catch-ups") { try await refused(.unsolicitedCatchUp, at: a) >= before + 2 }
        try await eventually("mallory's marker at a") { await events.messages().contains { $0["text"]?.stringValue == "marker" } }
        #expect(await events.messages().filter { $0["text"]?.stringValue == "once" }.count == 1, "a replayed directed message is delivered once")
        let attachments = try await a.request("attach.list")["attachments"]?.arrayValue ?? []
        #expect(attachments.isEmpty, "no journal entry from a catch-up nobody asked for")
        // b's first broadcast is still b's first at a: nothing was skipped.
        _ = try await b.request("send", ["text": "first"])
        try await eventually("b's first message at a") { await events.messages().contains { $0["text"]?.stringValue == "first" } }
        #expect(await events.messages().first { $0["text"]?.stringValue == "first" }?["seq"] == .int(1))
        await events.stop()
    }
}
