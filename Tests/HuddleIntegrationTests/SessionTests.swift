import Foundation
import HuddleTestSupport
import HuddleControl
import HuddleCrypto
import Testing

/// Real `huddle run` processes on loopback, driven through their control sockets.
@Suite(.timeLimit(.minutes(10)))
struct SessionTests {
    @Test func threeNodesJoinAndEachSeesThreeAliveMembers() async throws {
        let cluster = try TestCluster("join3")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        try await cluster.start("b")
        try await cluster.start("c")
        try await cluster.waitForFullMesh(3)
        let members = try await a.request("members")["members"]?.arrayValue ?? []
        #expect(members.count == 3)
        #expect(members.allSatisfy { $0.objectValue?["state"]?.stringValue == "alive" })
        #expect(members.filter { $0.objectValue?["self"]?.boolValue == true }.count == 1)
        let status = try await a.request("status")
        #expect(status["session"]?.stringValue?.count == 16)
        #expect(status["addr"]?.stringValue == a.addr)
    }

    @Test func broadcastsReachEverySubscriberExactlyOnceWithTheRightOrigin() async throws {
        let cluster = try TestCluster("bcast")
        defer { cluster.shutdown() }
        let nodes = [try await cluster.start("a"), try await cluster.start("b"), try await cluster.start("c")]
        try await cluster.waitForFullMesh(3)
        var collectors: [EventCollector] = []
        for node in nodes { collectors.append(try await EventCollector.subscribe(node, topics: ["messages"])) }
        let perSender = 20
        for i in 0..<perSender {
            for node in nodes { _ = try await node.request("send", ["text": .string("\(node.name)-\(i)")]) }
        }
        for (node, collector) in zip(nodes, collectors) {
            try await eventually("\(node.name) to receive \(perSender * 3) messages") { await collector.messages().count >= perSender * 3 }
        }
        try await Task.sleep(for: .milliseconds(300))
        for collector in collectors {
            let messages = await collector.messages()
            #expect(messages.count == perSender * 3, "duplicates or strays: \(messages.count)")
            #expect(Set(messages.compactMap { $0["msg"]?.stringValue }).count == messages.count)
            for node in nodes {
                let fromNode = messages.filter { $0["from"]?.stringValue == node.member }
                #expect(fromNode.map { $0["text"]?.stringValue ?? "" } == (0..<perSender).map { "\(node.name)-\($0)" })
                let seqs = fromNode.compactMap { $0["seq"]?.intValue }
                #expect(seqs == Array(1...Int64(perSender)))
            }
        }
        for collector in collectors { await collector.stop() }
    }

    @Test func directedSendReachesOnlyItsTargets() async throws {
        let cluster = try TestCluster("direct")
        defer { cluster.shutdown() }
        let nodes = [try await cluster.start("a"), try await cluster.start("b"), try await cluster.start("c")]
        try await cluster.waitForFullMesh(3)
        var collectors: [EventCollector] = []
        for node in nodes { collectors.append(try await EventCollector.subscribe(node, topics: ["messages"])) }
        let reply = try await nodes[0].request("send", ["text": "for c only", "to": .array([.string(nodes[2].member)])])
        #expect(reply["seq"] == .null)
        _ = try await nodes[0].request("send", ["text": "marker"])
        for collector in collectors {
            try await eventually("the marker broadcast everywhere") { await collector.messages().contains { $0["text"]?.stringValue == "marker" } }
        }
        var directedAt: [Int] = []
        for collector in collectors { directedAt.append(await collector.messages().filter { $0["text"]?.stringValue == "for c only" }.count) }
        #expect(directedAt == [0, 0, 1])
        let event = await collectors[2].messages().first { $0["text"]?.stringValue == "for c only" }
        #expect(event?["to"] == .array([.string(nodes[2].member)]))
        #expect(event?["from"]?.stringValue == nodes[0].member)
        for collector in collectors { await collector.stop() }
    }

    /// Message events are written straight to bytes, and on a node nobody subscribed to only when
    /// a `since` replay asks: bodies must come out exact either way (escapes, non-ASCII, binary).
    @Test func messageEventsCarryExactBodiesLiveAndReplayed() async throws {
        let cluster = try TestCluster("evbody")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let live = try await EventCollector.subscribe(b, topics: ["messages"])
        let texts = ["quote \" backslash \\ newline \n tab \t", "ünïcödé ✓ 🎉", "\u{01}control"]
        for text in texts { _ = try await a.request("send", ["text": .string(text)]) }
        let binary = "//4AgA=="  // ff fe 00 80: not UTF-8
        _ = try await a.request("send", ["data": .string(binary)])
        try await eventually("b to deliver all four") { await live.messages().count == 4 }
        // a had no subscriber while it sent: its own events were kept unwritten until this replay.
        let replay = try await EventCollector.subscribe(a, topics: ["messages"], since: 0)
        try await eventually("a's replay of its four messages") { await replay.messages().count == 4 }
        for events in [await live.messages(), await replay.messages()] {
            #expect(events.prefix(3).map { $0["text"]?.stringValue } == texts)
            #expect(events[3]["text"] == nil && events[3]["data"]?.stringValue == binary)
            #expect(events.map { $0["seq"] } == [.int(1), .int(2), .int(3), .int(4)])
            #expect(events.allSatisfy { $0["from"]?.stringValue == a.member && $0["deps"] == .object([:]) && $0["to"] == .null && $0["reliable"] == .bool(true) })
        }
        #expect(await live.messages().map { $0["msg"] } == (await replay.messages()).map { $0["msg"] })
        await live.stop()
        await replay.stop()
    }

    @Test func unreliableSendArrivesAsOneDatagram() async throws {
        let cluster = try TestCluster("unrel")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let collector = try await EventCollector.subscribe(b, topics: ["messages"])
        // Sent once (the full mesh put b's datagram keys in place): loopback drops nothing, so
        // this one datagram arrives, and only once.
        let reply = try await a.request("send", ["text": "ping", "reliable": false])
        #expect(reply["seq"] == .null, "an unreliable send takes no seq")
        try await eventually("the one unreliable message to arrive (loopback drops nothing)") {
            await collector.messages().contains { $0["reliable"] == .bool(false) && $0["text"]?.stringValue == "ping" }
        }
        try await collector.catchUp()
        #expect(await collector.messages().filter { $0["text"]?.stringValue == "ping" }.count == 1)
        let tooBig = String(repeating: "x", count: 2000)
        await #expect(throws: ControlError.self) { _ = try await a.request("send", ["text": .string(tooBig), "reliable": false]) }
        await collector.stop()
    }

    @Test func aNodeWithAnotherKeyIsRefusedAndNeverAMember() async throws {
        let cluster = try TestCluster("wrongk")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let otherKey = "\(cluster.dir)/other.key"
        try SessionKey.generate().write(to: otherKey)
        let intruder = try await cluster.start("intruder", key: otherKey)
        await expectFailure(.unavailable, what: "joining with another session key") {
            _ = try await intruder.request("join", ["addr": .string(a.addr)])
        }
        try await Task.sleep(for: .seconds(1))
        #expect(try await a.aliveMembers() == 1)
        let names = try await a.request("members")["members"]?.arrayValue?.compactMap { $0.objectValue?["name"]?.stringValue } ?? []
        #expect(!names.contains("intruder"))
        #expect(try await intruder.aliveMembers() == 1)
    }

    @Test func badControlLinesGetBadRequestAndTheConnectionStillWorks() async throws {
        let cluster = try TestCluster("badreq")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let raw = try RawControlConnection(path: a.control)
        defer { raw.close() }
        for line in ["this is not json", "{\"op\":\"no-such-op\",\"id\":7}", "[1,2]", "{\"id\":3}", "{\"op\":\"send\",\"id\":4}",
                     "{\"op\":\"send\",\"id\":5,\"text\":1}", "{\"op\":\"send\",\"id\":6,\"data\":\"***\"}"] {
            let reply = try raw.roundTrip(line)
            #expect(reply["ok"] == .bool(false), "\(line)")
            #expect(reply["error"]?.objectValue?["code"]?.stringValue == "bad_request", "\(line)")
        }
        #expect(try raw.roundTrip("{\"op\":\"no-such-op\",\"id\":7}")["id"] == .int(7))
        #expect(try raw.roundTrip("garbage")["id"] == .null)
        let ok = try raw.roundTrip("{\"op\":\"status\",\"id\":\"s\"}")
        #expect(ok["ok"] == .bool(true))
        #expect(ok["id"] == .string("s"))
    }

    @Test func leaveExitsZeroAndTheOthersSeeLeft() async throws {
        let cluster = try TestCluster("leave")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let collector = try await EventCollector.subscribe(a, topics: ["members"])
        let reply = try await b.request("leave")
        #expect(reply["handed_off"] == .int(0))
        #expect(try await b.waitForExit() == 0)
        try await eventually("a to see b as left") { await collector.memberChanges("left").contains { $0["member"]?.objectValue?["member"]?.stringValue == b.member } }
        #expect(await collector.memberChanges("failed").isEmpty)
        let states = try await a.request("members")["members"]?.arrayValue?.compactMap { $0.objectValue?["state"]?.stringValue } ?? []
        #expect(states.sorted() == ["alive", "left"])
        #expect(!FileManager.default.fileExists(atPath: b.control), "the control socket is removed on exit")
        await collector.stop()
    }

    /// SIGTERM and SIGINT are a graceful shutdown (swift-service-lifecycle's ServiceGroup): a node
    /// without `--data-dir` leaves, the others see `left` (never `failed`), and it exits 0 with its
    /// socket removed. (With `--data-dir` a signal stops it instead: RestartProcessTests.)
    @Test func sigtermAndSigintLeaveGracefully() async throws {
        let cluster = try TestCluster("signals")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b", dataDir: false)
        let c = try await cluster.start("c", dataDir: false)
        try await cluster.waitForFullMesh(3)
        let collector = try await EventCollector.subscribe(a, topics: ["members"])
        b.process.interrupt()
        c.process.terminate()
        #expect(try await b.waitForExit() == 0, "SIGINT: \(b.log)")
        #expect(try await c.waitForExit() == 0, "SIGTERM: \(c.log)")
        for node in [b, c] {
            try await eventually("a to see \(node.name) as left") {
                await collector.memberChanges("left").contains { $0["member"]?.objectValue?["member"]?.stringValue == node.member }
            }
            #expect(!FileManager.default.fileExists(atPath: node.control), "the control socket is removed on exit")
        }
        #expect(await collector.memberChanges("failed").isEmpty)
        await collector.stop()
    }

    @Test func aKilledNodeIsReportedFailed() async throws {
        let cluster = try TestCluster("killed")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let collector = try await EventCollector.subscribe(a, topics: ["members"])
        kill(b.process.processIdentifier, SIGKILL)
        // Detection takes a suspicion timeout or so; the deadline is for a loaded machine.
        try await eventually("a to see b as failed", within: 120) { await collector.memberChanges("failed").count == 1 }
        await collector.stop()
    }

    @Test func aSecondNodeOnALiveControlSocketIsRefused() async throws {
        let cluster = try TestCluster("twice")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let clash = Process()
        clash.executableURL = URL(fileURLWithPath: huddleBinary)
        clash.arguments = ["run", "--key", cluster.key, "--listen", "127.0.0.1:0", "--control", a.control]
        let err = TestProcesses.pipe()
        clash.standardError = err
        try TestProcesses.launch(clash)
        let status = await clash.exitStatus()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(status == 1)
        #expect(message.contains("already running"), "\(message)")
        #expect(try await a.aliveMembers() == 1, "the first node still answers")
    }

    @Test func subscribeSinceReplaysRetainedEventsWithConsecutiveCursors() async throws {
        let cluster = try TestCluster("since")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        for i in 0..<5 { _ = try await a.request("send", ["text": .string("m\(i)")]) }
        let client = try await a.client()
        let reply = try await client.ask("subscribe", ["since": 0])
        let latest = reply["cursor"]?.intValue ?? -1
        #expect(latest >= 5)
        var cursors: [Int64] = []
        for try await event in await client.events() {
            cursors.append(event["cursor"]?.intValue ?? -1)
            if cursors.count == Int(latest) { break }
        }
        #expect(cursors == Array(1...latest))
        await client.close()
    }
}
