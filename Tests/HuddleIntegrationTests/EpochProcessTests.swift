import Foundation
import HuddleTestSupport
import HuddleControl
import HuddleCrypto
import HuddleSim
import Testing

/// Removal and rotation of the session key between real processes (issue 21). Every node has its
/// own copy of the key file: a node rewrites its file when the session moves to a new epoch.
func startOwnKey(_ cluster: TestCluster, _ name: String, join: [String]? = nil, identity: Bool = false) async throws -> TestNode {
    let path = "\(cluster.dir)/\(name).key"
    if !FileManager.default.fileExists(atPath: path) {
        try FileManager.default.copyItem(atPath: cluster.key, toPath: path)
        chmod(path, 0o600)
    }
    return try await cluster.start(name, join: join, key: path, extra: identity ? ["--identity", "\(cluster.dir)/\(name).id"] : [])
}

/// `startOwnKey` behind a relay that identifies who dials each connection (`StallableRelay`).
func startOwnKeyBehindRelay(_ cluster: TestCluster, _ name: String, identity: Bool = false) async throws -> (TestNode, StallableRelay) {
    let path = "\(cluster.dir)/\(name).key"
    if !FileManager.default.fileExists(atPath: path) {
        try FileManager.default.copyItem(atPath: cluster.key, toPath: path)
        chmod(path, 0o600)
    }
    return try await cluster.startBehindRelay(name, key: path, extra: identity ? ["--identity", "\(cluster.dir)/\(name).id"] : [],
                                              relay: try StallableRelay(identifyDialers: true))
}

/// a, b and c, each with its own key and identity behind a relay (`startOwnKeyBehindRelay`),
/// fully meshed. Each relay goes into `relays` (a's, b's, c's) as it is made, so that the caller's
/// cleanup closes it even when a later start fails.
func startTrioBehindRelays(_ cluster: TestCluster, relays: inout [StallableRelay]) async throws -> (TestNode, TestNode, TestNode) {
    var nodes: [TestNode] = []
    for name in ["a", "b", "c"] {
        let (node, relay) = try await startOwnKeyBehindRelay(cluster, name, identity: true)
        relays.append(relay)
        nodes.append(node)
    }
    try await cluster.waitForFullMesh(3)
    return (nodes[0], nodes[1], nodes[2])
}

/// Stalls every link of `c`'s at the trio's relays (a's, b's, c's): those dialed to c at its own,
/// those c dialed at a's and b's, both ways; SWIM's datagrams still cross, so c is not failed.
func stallLinks(of c: TestNode, relays: [StallableRelay]) async throws {
    let cPid = c.process.processIdentifier
    try await relays[2].stall()
    try await relays[0].stall(dialedBy: [cPid])
    try await relays[1].stall(dialedBy: [cPid])
}

func epoch(_ node: TestNode) async throws -> Int64 { try await node.request("status")["epoch"]?.intValue ?? -1 }

private func keyFileEpoch(_ cluster: TestCluster, _ name: String) throws -> UInt64 { try SessionKey.load(from: "\(cluster.dir)/\(name).key").epoch }

/// Keeps sending numbered messages from `node` until cancelled; returns how many were accepted.
/// Every send must be accepted: a refused send, or a sender that could not connect or sent
/// nothing at all, fails the test (the exactly-once check must not pass on 0 sent).
func steadySender(_ node: TestNode, prefix: String, sourceLocation: SourceLocation = #_sourceLocation) -> Task<Int, Never> {
    Task {
        let client: ControlClient
        do { client = try await node.client() } catch {
            Issue.record("\(node.name)'s sender could not connect: \(error)", sourceLocation: sourceLocation)
            return 0
        }
        var sent = 0
        var failures: [String] = []
        while !Task.isCancelled {
            do {
                _ = try await client.ask("send", ["text": .string("\(prefix)-\(sent)")])
                sent += 1
            } catch where !(error is CancellationError) {
                failures.append("\(error)")
            } catch {}
            try? await Task.sleep(for: .milliseconds(15))
        }
        await client.close()
        #expect(failures.isEmpty, "\(node.name): \(failures.count) sends failed (\(sent) accepted): \(failures.prefix(3))", sourceLocation: sourceLocation)
        #expect(sent > 0, "\(node.name) sent nothing", sourceLocation: sourceLocation)
        return sent
    }
}

/// Lets the senders run a moment longer, stops them, and returns how many each sent (by member).
func stopAfterAMoment(_ senders: [Task<Int, Never>], of nodes: [TestNode]) async -> [String: Int] {
    try? await Task.sleep(for: .milliseconds(300))
    var sent: [String: Int] = [:]
    for (node, task) in zip(nodes, senders) {
        task.cancel()
        sent[node.member] = await task.value
    }
    return sent
}

/// Every node in `nodes` delivered every message any of them delivered from `senders`, once, in
/// causal order (DeliveryChecker), and `expected` messages in all from each sender.
private func expectExactlyOnce(_ nodes: [TestNode], _ collectors: [EventCollector], expected: [String: Int], sourceLocation: SourceLocation = #_sourceLocation) async throws {
    try await eventually("every remaining member to deliver every message", within: 60) {
        for collector in collectors {
            let log = await collector.messages().compactMap(Delivered.init)
            for (from, count) in expected where log.filter({ $0.from == from }).count < count { return false }
        }
        return true
    }
    var logs: [DeliveryLog] = []
    for (node, collector) in zip(nodes, collectors) {
        let status = try await node.request("status")
        var baseline: [String: UInt64] = [:]
        for (k, v) in status["baseline"]?.objectValue ?? [:] { baseline[k] = UInt64(v.intValue ?? 0) }
        logs.append(DeliveryLog(member: node.name, baseline: baseline, deliveries: await collector.messages().compactMap(Delivered.init).map(\.record), stayed: true))
    }
    let problems = DeliveryChecker.violations(logs)
    #expect(problems.isEmpty, "\(problems.prefix(5))", sourceLocation: sourceLocation)
    for log in logs {
        for (from, count) in expected {
            #expect(log.deliveries.filter { $0.from == from }.count == count, "\(log.member) from \(from)", sourceLocation: sourceLocation)
        }
    }
}

@Suite(.timeLimit(.minutes(10)))
struct EpochProcessTests {
    @Test func aRemovedMemberOfFiveIsCutOffWhileTheOtherFourLoseNothing() async throws {
        let cluster = try TestCluster("remove")
        defer { cluster.shutdown() }
        var nodes: [TestNode] = []
        for name in ["a", "b", "c", "d", "e"] { nodes.append(try await startOwnKey(cluster, name)) }
        try await cluster.waitForFullMesh(5)
        let (remover, removed) = (nodes[0], nodes[4])
        let remaining = Array(nodes.prefix(4))
        var collectors: [EventCollector] = []
        for node in nodes { collectors.append(try await EventCollector.subscribe(node, topics: ["messages", "members"])) }
        let senders = remaining.map { steadySender($0, prefix: $0.name) }
        try await Task.sleep(for: .milliseconds(300))
        let reply = try await remover.request("remove", ["member": .string(removed.member)], within: 60)
        #expect(reply["epoch"]?.intValue == 1)
        let sent = await stopAfterAMoment(senders, of: remaining)
        for node in remaining { try await eventually("\(node.name) on epoch 1") { try await epoch(node) == 1 } }
        for node in remaining { #expect(try keyFileEpoch(cluster, node.name) == 1, "\(node.name)'s key file moved to epoch 1") }
        #expect(try keyFileEpoch(cluster, "e") == 0, "the removed member keeps only the key it had")
        // Everyone, the removed member included, sees it removed by the remover.
        for (node, collector) in zip(nodes, collectors) {
            try await eventually("\(node.name) to see e removed") {
                await collector.memberChanges("removed").contains { $0["member"]?.objectValue?["member"]?.stringValue == removed.member }
            }
            let event = await collector.memberChanges("removed").first { $0["member"]?.objectValue?["member"]?.stringValue == removed.member }
            #expect(event?["by"]?.stringValue == remover.member, "\(node.name): removed by \(remover.member)")
        }
        try await expectExactlyOnce(remaining, Array(collectors.prefix(4)), expected: sent)

        // After the removal: the four exchange messages and an attachment; the removed member
        // receives nothing, sends nothing that arrives, holds no link and does not fetch.
        _ = try? await removed.request("send", ["text": "from the removed member"])
        _ = try await remover.request("send", ["text": "after the removal"])
        let file = "\(cluster.dir)/after.bin"
        try Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: URL(fileURLWithPath: file))
        let attachment = try await remover.request("attach.add", ["path": .string(file)])
        let id = attachment["attachment"]?.objectValue?["id"]?.stringValue ?? ""
        for node in remaining.dropFirst() {
            let out = "\(cluster.dir)/\(node.name)-after.bin"
            _ = try await node.request("attach.get", ["id": .string(id), "path": .string(out), "timeout_ms": 60_000], within: 90)
            #expect(FileManager.default.contents(atPath: out) == FileManager.default.contents(atPath: file))
        }
        for collector in collectors.prefix(4) {
            try await eventually("the message after the removal to arrive") { await collector.messages().contains { $0["text"]?.stringValue == "after the removal" } }
            try await collector.catchUp()
            #expect(await !collector.messages().contains { $0["text"]?.stringValue == "from the removed member" })
        }
        try await collectors[4].catchUp()
        #expect(await !collectors[4].messages().contains { $0["text"]?.stringValue == "after the removal" })
        let list = try await removed.request("attach.list")
        #expect(!(list["attachments"]?.arrayValue ?? []).contains { $0.objectValue?["id"]?.stringValue == id }, "the removed member never hears of the new attachment")
        #expect(try await removed.request("stats")["links"]?.intValue == 0)
        for node in remaining {
            #expect(try await node.aliveMembers() == 4)
            #expect(try await node.request("stats")["links"]?.intValue == 3)
        }
        for collector in collectors { await collector.stop() }
    }

    @Test func rekeysUnderSteadyLoadLoseNothing() async throws {
        let cluster = try TestCluster("rekey")
        defer { cluster.shutdown() }
        var nodes: [TestNode] = []
        for name in ["a", "b", "c"] { nodes.append(try await startOwnKey(cluster, name)) }
        try await cluster.waitForFullMesh(3)
        var collectors: [EventCollector] = []
        for node in nodes { collectors.append(try await EventCollector.subscribe(node, topics: ["messages"])) }
        let senders = nodes.map { steadySender($0, prefix: $0.name) }
        for (round, node) in [nodes[1], nodes[2]].enumerated() {
            try await Task.sleep(for: .milliseconds(300))
            let reply = try await node.request("rekey", within: 60)
            #expect(reply["epoch"]?.intValue == Int64(round + 1))
        }
        let sent = await stopAfterAMoment(senders, of: nodes)
        for node in nodes { try await eventually("\(node.name) on epoch 2") { try await epoch(node) == 2 } }
        try await expectExactlyOnce(nodes, collectors, expected: sent)
        // A link made now uses the new key: the stats show no refusals among honest members.
        for node in nodes { #expect(field(try await node.request("stats"), "refused", "removed_node") == 0) }
        for collector in collectors { await collector.stop() }
    }

    @Test func aPausedOrRestartedMemberComesBackButARemovedOneIsRefused() async throws {
        let cluster = try TestCluster("comeback")
        var relays: [StallableRelay] = []
        defer {
            for relay in relays { relay.close() }
            cluster.shutdown()
        }
        let (a, b, firstC) = try await startTrioBehindRelays(cluster, relays: &relays)
        let (ra, rb, rc) = (relays[0], relays[1], relays[2])
        var c = firstC

        // Cut off through a rotation, then back without a `join`: every link of c's stalls at the
        // relays (those dialed to c at its own, those c dialed at a's and b's), both ways, for as
        // long as the rotation takes, while SWIM's datagrams still cross so c is never failed. (A
        // SIGSTOP, as before, lasted as long as the rekey took: past 2.5 s c was failed, and came
        // back only by re-merge 10-20 s later.)
        let cPid = c.process.processIdentifier
        try await stallLinks(of: c, relays: relays)
        _ = try await a.request("rekey", within: 60)
        #expect(try await epoch(c) == 0, "c took part in the rotation it was cut off from (c is \(cPid); relays a: \(ra.pumpStates); b: \(rb.pumpStates); c: \(rc.pumpStates))")
        for relay in relays { relay.resume() }
        try await eventually("the cut-off member on epoch 1", within: 60) { try await epoch(c) == 1 }
        try await eventually("three members alive everywhere", within: 60) {
            for node in [a, b, c] where try await node.aliveMembers() != 3 { return false }
            return true
        }
        #expect(try keyFileEpoch(cluster, "c") == 1)

        // Down through a rotation, restarted with its identity and its old key file: let back in.
        c.kill()
        _ = try await c.waitForExit()
        _ = try await b.request("rekey", within: 60)
        #expect(try keyFileEpoch(cluster, "c") == 1, "c's file still holds the epoch it had")
        c = try await startOwnKey(cluster, "c", join: [a.addr], identity: true)
        try await eventually("the restarted member on epoch 2", within: 60) { try await epoch(c) == 2 }
        try await eventually("the restarted member to see everyone", within: 60) { try await c.aliveMembers() == 3 }
        #expect(try keyFileEpoch(cluster, "c") == 2)

        // Removed, then restarted with its identity and the key it held: refused by everyone.
        let node = try await c.request("status")["node"]?.stringValue ?? ""
        _ = try await a.request("remove", ["member": .string(node)], within: 60)
        try await eventually("the removed member cut off") {
            let (seenByA, seenByB) = (try await a.aliveMembers(), try await b.aliveMembers())
            return seenByA == 2 && seenByB == 2
        }
        c.kill()
        _ = try await c.waitForExit()
        #expect(try keyFileEpoch(cluster, "c") == 2, "a removed member is never handed the new key")
        c = try await startOwnKey(cluster, "c", join: [a.addr, b.addr], identity: true)
        // Resumed from its data directory it knows it was removed (and says so, and never tries);
        // started without that memory it tries, and its links are refused as a removed node key.
        try await eventually("its links refused as a removed node key, or itself knowing it was removed", within: 60) {
            if c.log.contains("was removed from the session") { return true }
            return field(try await a.request("stats"), "refused", "removed_node") > 0
        }
        #expect(try await c.aliveMembers() == 1)
        let (aliveAtA, aliveAtB) = (try await a.aliveMembers(), try await b.aliveMembers())
        #expect(aliveAtA == 2 && aliveAtB == 2)
        let (epochA, epochC) = (try await epoch(a), try await epoch(c))
        // Resumed, it knows the change that removed it (epoch 3) but holds no key of it.
        #expect(epochA == 3 && (epochC == 2 || (epochC == 3 && c.log.contains("was removed from the session"))))
    }

    @Test func aNodePairedAfterARotationGetsTheCurrentEpoch() async throws {
        let cluster = try TestCluster("pairepoch")
        defer { cluster.shutdown() }
        let a = try await startOwnKey(cluster, "a")
        _ = try await startOwnKey(cluster, "b")
        try await cluster.waitForFullMesh(2)
        _ = try await a.request("rekey", within: 60)
        let code = try #require(try await a.request("invite")["code"]?.stringValue)
        let keyOut = "\(cluster.dir)/c.key"
        let c = try await cluster.start("c", join: [a.addr], keyArguments: ["--invite", code, "--key-out", keyOut])
        try await eventually("the paired node on epoch 1 with both others", within: 60) {
            let status = try await c.request("status")
            return status["epoch"]?.intValue == 1 && status["members"]?.intValue == 3
        }
        let key = try SessionKey.load(from: keyOut)
        let original = try SessionKey.load(from: cluster.key)
        #expect(key.epoch == 1 && key.sessionID == original.sessionID && key != original, "the paired node holds the current epoch's key, in the same session")
    }
}
