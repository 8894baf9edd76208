import Foundation
import HuddleTestSupport
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
    let member: AdversaryMember
    var identity: Identity { member.identity }
    var info: MemberInfo { member.info }
    var link: AdversaryLink { member.link }

    /// `as`: another Mallory's identity and member id, for a second link of the same member.
    init(linkedTo node: TestNode, key: String, as other: Mallory? = nil) async throws {
        member = try AdversaryMember(addr: node.addr, key: try SessionKey.load(from: key), identity: other?.identity ?? Identity.generate(), id: other?.info.id)
        let mallory = member.info.id.description
        try await eventually("\(node.name) to know mallory") { try await record(of: mallory, at: node) != nil }
    }

    func claim(failed: Bool, about member: MemberID, incarnation: UInt64, inNameOf claimer: MemberID? = nil) -> SWIMGossip {
        self.member.claim(failed: failed, about: member, incarnation: incarnation, inNameOf: claimer)
    }

    func gossip(_ updates: [SWIMGossip]) throws { try member.gossip(updates) }

    func stayAlive(incarnation: UInt64) throws { try member.stayAlive(incarnation: incarnation) }

    /// Her own signed leave, at `incarnation`.
    func leave(incarnation: UInt64) throws {
        try gossip([.left(info.id, incarnation: incarnation, signature: identity.sign(MembershipStatement.left(info.id, incarnation: incarnation)))])
    }

    /// Her own signed broadcast of `entry` (her first broadcast: seq 1, no dependencies), after the
    /// `hello` that tells the node where her broadcasts start.
    func broadcast(_ entry: JournalEntry) throws {
        try link.write(.hello(since: 0, nonApplication: 0))
        let message = WireMessage(origin: info.id, counter: 1, seq: 1, kind: .journal, to: nil, body: entry.encoded())
        try link.write(.message(MessageBatch.sign([message], identity: identity)[0]))
    }
}

/// Members a, b and c of `cluster`, each linked to the others.
private func threeMembers(_ cluster: TestCluster) async throws -> (TestNode, TestNode, TestNode) {
    let a = try await cluster.start("a")
    let b = try await cluster.start("b")
    let c = try await cluster.start("c")
    try await cluster.waitForFullMesh(3)
    return (a, b, c)
}

/// `member`'s state and incarnation as `node` holds them.
private func state(of member: String, at node: TestNode) async throws -> (state: String, incarnation: Int64) {
    let held = try await record(of: member, at: node)
    return (held?["state"]?.stringValue ?? "unknown", held?["incarnation"]?.intValue ?? -1)
}

/// The `member` events about `member` that `events` collected, by change.
private func changes(about member: String, in events: EventCollector) async -> [String] {
    await events.events.filter { $0["event"]?.stringValue == "member" && $0["member"]?.objectValue?["member"]?.stringValue == member }
        .compactMap { $0["change"]?.stringValue }
}

@Suite("Hostile members (real nodes)", .timeLimit(.minutes(10)))
struct HostileMemberTests {
    @Test func forgedMembershipRecordsNeitherEvictReplaceNorSuspectAMember() async throws {
        try await withoutSuspicionByLoad("b suspected at a") { _ in try await forgedMembershipRecords() }
    }

    /// One run; returns what may be load's doing (b suspected or failed at a).
    private func forgedMembershipRecords() async throws -> [String] {
        let cluster = try TestCluster("hostile-records")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let events = try await EventCollector.subscribe(a, topics: ["members", "messages"])
        guard let aID = MemberID(a.member), let bID = MemberID(b.member),
              let bRecord = try await record(of: b.member, at: a),
              let bNode = bRecord["node"]?.stringValue, let bIncarnation = bRecord["incarnation"]?.intValue
        else { Issue.record("no record of b at a"); return [] }
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
        var findings: [String] = []
        #expect(held?["node"]?.stringValue == bNode && held?["addr"]?.stringValue == b.addr && held?["state"]?.stringValue != "left")
        if held?["state"]?.stringValue != "alive" { findings.append("b at a: \(String(describing: held))") }
        #expect(try await record(of: MemberID(raw: 0x6057).description, at: a) == nil, "the unsigned member was not learned")
        #expect((try await record(of: a.member, at: b))?["incarnation"]?.intValue ?? .max < 1000, "a did not refute a forged claim")
        // b is still a member to a: its message arrives; a never reported it left or failed.
        _ = try await b.request("send", ["text": "still here"])
        try await eventually("b's message at a") { await events.messages().contains { $0["text"]?.stringValue == "still here" } }
        try await events.catchUp()
        let aboutB = await events.events.filter { $0["event"]?.stringValue == "member" && $0["member"]?.objectValue?["member"]?.stringValue == b.member }
        // Nobody leaves: a `left` of b is the forged one, whatever the load.
        #expect(!aboutB.contains { $0["change"]?.stringValue == "left" }, "\(aboutB)")
        if aboutB.contains(where: { ["failed", "suspect"].contains($0["change"]?.stringValue ?? "") }) { findings.append("a reported b: \(aboutB)") }
        #expect(a.process.isRunning && b.process.isRunning)
        await events.stop()
        return findings
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
                                meta: [], uploader: mallory.info.id, uploaderNodeKey: mallory.identity.publicKey, signature: [])
        manifest.sign(with: mallory.identity, key: key)
        try mallory.link.write(.baseline([bID: 50], nonApplication: [:]))
        try mallory.link.write(.journal([.add(manifest, key: key)]))
        // Mallory's own directed message to a, written three times.
        let once = MessageBatch.sign([WireMessage(origin: mallory.info.id, counter: 1, seq: 0, to: [aID], body: Array("once".utf8))], identity: mallory.identity)
        let marker = MessageBatch.sign([WireMessage(origin: mallory.info.id, counter: 2, seq: 0, to: [aID], body: Array("marker".utf8))], identity: mallory.identity)
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

    /// Issue 33, item 3: a member's `failed` claim only starts a suspicion the member refutes.
    /// Mallory (a live member: she refutes every suspicion of her) claims c failed every 50 ms for
    /// 10 s, at whatever incarnation c holds at a, so each refutation is followed by a new claim:
    /// c is never `failed` at any honest node, and its messages keep reaching everyone.
    @Test func repeatedFailedClaimsAfterEachRefutationNeverFailAnHonestMember() async throws {
        try await withoutSuspicionByLoad("c failed at an honest node") { _ in try await repeatedFailedClaims() }
    }

    /// One run; returns what may be load's doing (c failed: a refutation late on a loaded machine).
    private func repeatedFailedClaims() async throws -> [String] {
        let cluster = try TestCluster("hostile-claims")
        defer { cluster.shutdown() }
        let (a, b, c) = try await threeMembers(cluster)
        guard let cID = MemberID(c.member) else { Issue.record("bad member id"); return [] }
        let watchers = [try await EventCollector.subscribe(a, topics: ["members", "messages"]),
                        try await EventCollector.subscribe(b, topics: ["members", "messages"])]
        let mallory = try await Mallory(linkedTo: a, key: cluster.key)
        let before = try await state(of: c.member, at: c).incarnation
        let rateBefore = try await refused(.claimRate, at: a)

        let start = ContinuousClock.now
        var mine: UInt64 = 1, claims = 0, polls = 0
        var failedSeen: [String] = []
        while ContinuousClock.now - start < .seconds(10) {
            try mallory.stayAlive(incarnation: mine)
            mine += 1
            let incarnation = try await state(of: c.member, at: a).incarnation
            try mallory.gossip([mallory.claim(failed: true, about: cID, incarnation: UInt64(max(0, incarnation)))])
            claims += 1
            for node in [a, b] where try await state(of: c.member, at: node).state == "failed" { failedSeen.append(node.name) }
            polls += 1
            try await Task.sleep(for: .milliseconds(50))  // the attack's pace, not a wait for a condition
        }
        for events in watchers { try await events.catchUp() }
        var findings: [String] = []
        if !failedSeen.isEmpty { findings.append("c was failed at \(failedSeen) (\(polls) polls)") }
        for (node, events) in zip([a, b], watchers) {
            let seen = await changes(about: c.member, in: events)
            #expect(!seen.contains("left"), "\(node.name) reported c: \(seen)")
            if seen.contains("failed") { findings.append("\(node.name) reported c: \(seen)") }
        }
        // The claims were heard (c refuted at least one suspicion) and most were refused by rate.
        // (Waited for: on a loaded machine the last claims' suspicions reach c after the loop.)
        do {
            try await eventually("c to refute a claim (the claims were heard)", within: 60) {
                try await state(of: c.member, at: c).incarnation > before
            }
        } catch {
            Issue.record("c never had to refute in \(claims) claims: the claims were not heard (\(error))")
        }
        let after = try await state(of: c.member, at: c).incarnation
        // At the attack's pace (a claim per 50 ms: about 150 in 10 s) most claims come within a
        // suspicion's window and are refused by rate; a loaded machine that polled only a few
        // times in the 10 s may never have sent two within one window.
        if claims >= 40 { #expect(try await refused(.claimRate, at: a) > rateBefore, "\(claims) claims, none refused by rate") }
        _ = try await c.request("send", ["text": "still a member"])
        for (node, events) in zip([a, b], watchers) {
            try await eventually("c's message at \(node.name)") { await events.messages().contains { $0["text"]?.stringValue == "still a member" } }
            await events.stop()
        }
        print("failed claims: \(claims) in 10 s; c refuted \(after - before) times; \(try await refused(.claimRate, at: a) - rateBefore) refused by rate at a")
        #expect(a.process.isRunning && b.process.isRunning && c.process.isRunning)
        return findings
    }

    /// Issue 33, item 3: nothing a member that left or failed claims counts, even relayed by a live
    /// member (claims travel by gossip): c is never suspected, at any honest node.
    @Test func aClaimByAMemberThatLeftOrFailedIsNotBelieved() async throws {
        try await withoutSuspicionByLoad("c suspected at an honest node") { _ in try await claimsByMembersThatLeftOrFailed() }
    }

    /// One run; returns what may be load's doing (c suspected, failed or refuting).
    private func claimsByMembersThatLeftOrFailed() async throws -> [String] {
        let cluster = try TestCluster("hostile-deadclaims")
        defer { cluster.shutdown() }
        let (a, b, c) = try await threeMembers(cluster)
        guard let cID = MemberID(c.member) else { Issue.record("bad member id"); return [] }
        let gone = try await Mallory(linkedTo: a, key: cluster.key)
        let dead = try await Mallory(linkedTo: a, key: cluster.key)
        let relay = try await Mallory(linkedTo: a, key: cluster.key)
        try gone.leave(incarnation: 1)
        var mine: UInt64 = 1
        // `dead` never answers a probe nor refutes: a fails it. The relay refutes, so it stays live.
        try await eventually("a to hold one Mallory left and the other failed", within: 60) {
            try relay.stayAlive(incarnation: mine)
            mine += 1
            let left = try await state(of: gone.info.id.description, at: a).state == "left"
            let failed = try await state(of: dead.info.id.description, at: a).state == "failed"
            return left && failed
        }
        let watchers = [try await EventCollector.subscribe(a, topics: ["members"]), try await EventCollector.subscribe(b, topics: ["members"]),
                        try await EventCollector.subscribe(c, topics: ["members"])]
        let before = try await state(of: c.member, at: c).incarnation
        let refusedBefore = try await refused(.claimerNotLive, at: a)
        for _ in 0..<20 {
            try relay.stayAlive(incarnation: mine)
            mine += 1
            let incarnation = UInt64(max(0, try await state(of: c.member, at: a).incarnation))
            try relay.gossip([gone.claim(failed: true, about: cID, incarnation: incarnation), dead.claim(failed: true, about: cID, incarnation: incarnation),
                              gone.claim(failed: false, about: cID, incarnation: incarnation), dead.claim(failed: false, about: cID, incarnation: incarnation)])
            try await Task.sleep(for: .milliseconds(100))  // the attack's pace, not a wait for a condition
        }
        // The relay keeps refuting while a reads the claims: on a loaded machine this wait can
        // outlast a suspicion of it.
        try await eventually("a to refuse the claims of members that are not live") {
            try relay.stayAlive(incarnation: mine)
            mine += 1
            return try await refused(.claimerNotLive, at: a) >= refusedBefore + 4
        }
        // The claims count only if the relay was live when a read them. A relay failed anyway (its
        // refutations came too late on a loaded machine) makes this attempt prove nothing: another.
        let relayState = try await state(of: relay.info.id.description, at: a).state
        for events in watchers { try await events.catchUp() }
        var findings: [String] = []
        if relayState == "failed" { findings.append("a failed the relay (its refutations came late)") }
        for (node, events) in zip([a, b, c], watchers) {
            let seen = await changes(about: c.member, in: events)
            #expect(!seen.contains("left"), "\(node.name) reported c: \(seen)")
            if seen.contains("suspect") || seen.contains("failed") { findings.append("\(node.name) reported c: \(seen)") }
            let held = try await state(of: c.member, at: node).state
            if held != "alive" { findings.append("\(node.name) holds c \(held)") }
            await events.stop()
        }
        let refuted = try await state(of: c.member, at: c).incarnation
        if refuted != before { findings.append("c had to refute (incarnation \(before) → \(refuted))") }
        return findings
    }

    /// Issue 33, item 3: only the uploader or an admin removes an attachment. Mallory's signed
    /// broadcast removing c's attachment is refused at every honest node, and the attachment stays;
    /// b asking its own node to remove it gets `not_member`; c's own remove works everywhere.
    @Test func aRemoveOfAnotherMembersAttachmentIsRefusedAtEveryMember() async throws {
        let cluster = try TestCluster("hostile-remove")
        defer { cluster.shutdown() }
        let (a, b, c) = try await threeMembers(cluster)
        let source = "\(cluster.dir)/c.bin"
        try writeRandomFile(source, count: 4096, seed: 33)
        let id = try await c.request("attach.add", ["path": .string(source)])["attachment"]?.objectValue?["id"]?.stringValue ?? ""
        func attachmentState(at node: TestNode) async throws -> String? {
            try await node.request("attach.list")["attachments"]?.arrayValue?.compactMap(\.objectValue).first { $0["id"]?.stringValue == id }?["state"]?.stringValue
        }
        for node in [a, b] { try await eventually("\(node.name) to know c's attachment") { try await attachmentState(at: node) != nil } }
        let mallory = try await Mallory(linkedTo: a, key: cluster.key)
        let links = [mallory, try await Mallory(linkedTo: b, key: cluster.key, as: mallory), try await Mallory(linkedTo: c, key: cluster.key, as: mallory)]
        var before: [Int64] = []
        for node in [a, b, c] { before.append(try await refused(.journalRemoveNotAllowed, at: node)) }
        for link in links { try link.broadcast(.remove(id: id)) }
        for (node, count) in zip([a, b, c], before) {
            try await eventually("\(node.name) to refuse mallory's remove") { try await refused(.journalRemoveNotAllowed, at: node) > count }
            let held = try await attachmentState(at: node)
            #expect(held != nil && held != "removed", "\(node.name) holds c's attachment as \(held ?? "nothing")")
        }
        await expectFailure(.notMember, what: "b removing c's attachment") { _ = try await b.request("attach.remove", ["id": .string(id)]) }
        #expect(try await attachmentState(at: b) != "removed")
        _ = try await c.request("attach.remove", ["id": .string(id)])
        for node in [a, b, c] { try await eventually("\(node.name) to remove c's attachment") { try await attachmentState(at: node) == "removed" } }
    }
}
