import Foundation
import HuddleControl
import HuddleSim
import HuddleTestSupport
import Testing

/// CONTROL.md, Restart: a node run with `--data-dir` comes back as the same member after
/// `kill -9` or SIGTERM, its event log and deliveries continue with nothing twice and nothing
/// missing, a second node on its directory is refused, and damaged state is never a crash.
/// The events a subscriber saw before a node's restart (`seen`) and after it (`after`, subscribed
/// with `since`), once a moment for any duplicate to show has passed; each cursor is expected once,
/// in increasing order across the restart (CONTROL.md, Restart).
func eventsAcrossTheRestart(_ seen: [JSONObject], then after: EventCollector) async throws -> [JSONObject] {
    try await Task.sleep(for: .milliseconds(300))  // room for a duplicate to show
    try await after.catchUp()
    let events = seen + (await after.events)
    let cursors = events.compactMap { $0["cursor"]?.intValue }
    #expect(Set(cursors).count == cursors.count, "no cursor twice")
    #expect(cursors == cursors.sorted(), "cursors increase across the restart")
    return events
}

@Suite(.timeLimit(.minutes(10)))
struct RestartProcessTests {
    /// Each member's record in `node`'s view, by member id.
    private func view(_ node: TestNode) async throws -> [JSONObject] {
        try await node.request("members")["members"]?.arrayValue?.compactMap(\.objectValue) ?? []
    }

    private func state(of member: String, at node: TestNode) async throws -> String? {
        try await view(node).first { $0["member"]?.stringValue == member }?["state"]?.stringValue
    }

    @Test func aMemberKilledMidStreamComesBackAsItselfAndItsSubscriberMissesNothing() async throws {
        let cluster = try TestCluster("restart")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        let c = try await cluster.start("c")
        try await cluster.waitForFullMesh(3)
        let before = try await EventCollector.subscribe(a, topics: ["messages"])
        let senders = [steadySender(b, prefix: "b"), steadySender(c, prefix: "c")]
        try await eventually("a to deliver some of the stream") { await before.events.count >= 20 }

        kill(a.process.processIdentifier, SIGKILL)
        _ = try await a.waitForExit()
        let (seen, resumeFrom) = await before.endedOnPurpose()
        // The stream goes on while a is down: the others retain what it misses.
        try await eventually("b to see a down", within: 60) { try await state(of: a.member, at: b) != "alive" }

        let restarted = ContinuousClock.now
        let back = try await cluster.start("a", join: [b.addr])
        let status = try await back.request("status")
        #expect(status["member"]?.stringValue == a.member, "the same member after the restart")
        #expect(status["resumed"] == .bool(true))
        for node in [b, c] {
            try await eventually("\(node.name) to see a alive again") { try await state(of: a.member, at: node) == "alive" }
            let records = try await view(node).filter { $0["node"]?.stringValue == status["node"]?.stringValue }
            #expect(records.count == 1, "\(node.name) holds one member for a's node: \(records)")
        }
        print("restart: a alive again in every view \(ContinuousClock.now - restarted) after it was started again")

        let after = try await EventCollector.subscribe(back, topics: ["messages"], since: resumeFrom)
        let sent = await stopAfterAMoment(senders, of: [b, c])
        try await eventually("a to deliver every message of the stream", within: 60) {
            let delivered = (seen + (await after.events)).compactMap(Delivered.init)
            return sent.allSatisfy { member, count in delivered.filter { $0.from == member }.count >= count }
        }
        let events = try await eventsAcrossTheRestart(seen, then: after)
        let delivered = events.compactMap(Delivered.init)
        for (member, count) in sent {
            #expect(delivered.filter { $0.from == member }.count == count, "a delivered each of \(member)'s \(count) messages once")
        }
        var baseline: [String: UInt64] = [:]
        for (k, v) in (try await back.request("status"))["baseline"]?.objectValue ?? [:] { baseline[k] = UInt64(v.intValue ?? 0) }
        let problems = DeliveryChecker.violations([DeliveryLog(member: "a", baseline: baseline, deliveries: delivered.map(\.record), stayed: true)])
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        await after.stop()
    }

    @Test func chunksStoredBeforeARestartAreNotFetchedAgain() async throws {
        let cluster = try TestCluster("rechunk")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let original = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2654435761 >> 13) }
        let file = "\(cluster.dir)/original.bin"
        try Data(original).write(to: URL(fileURLWithPath: file))
        let id = try #require(try await a.request("attach.add", ["path": .string(file)])["attachment"]?.objectValue?["id"]?.stringValue)
        _ = try await b.request("attach.get", ["id": .string(id), "path": .string("\(cluster.dir)/first.bin")])
        let chunks = try #require(try await b.request("stats")["chunks_fetched"]?.intValue)
        #expect(chunks > 1)

        kill(b.process.processIdentifier, SIGKILL)
        _ = try await b.waitForExit()
        let back = try await cluster.start("b", join: [a.addr])
        #expect(try await back.request("status")["resumed"] == .bool(true))
        try await eventually("b to hold the whole attachment again") {
            let list = try await back.request("attach.list")["attachments"]?.arrayValue ?? []
            return list.contains { $0.objectValue?["id"]?.stringValue == id && $0.objectValue?["complete"] == .bool(true) }
        }
        _ = try await back.request("attach.get", ["id": .string(id), "path": .string("\(cluster.dir)/second.bin")])
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(cluster.dir)/second.bin")) == Data(original))
        #expect(try await back.request("stats")["chunks_fetched"]?.intValue == 0, "no chunk fetched again after the restart")
    }

    /// Killed while it fetches: once back, the fetch completes and what it had stored is not fetched again.
    @Test func aFetchKilledMidwayCompletesAfterTheRestartWithoutFetchingTwice() async throws {
        let cluster = try TestCluster("refetch")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let original = (0..<(24 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2246822519 >> 11) }
        let file = "\(cluster.dir)/original.bin"
        try Data(original).write(to: URL(fileURLWithPath: file))
        let added = try #require(try await a.request("attach.add", ["path": .string(file)])["attachment"]?.objectValue)
        let id = try #require(added["id"]?.stringValue)
        let total = try #require(added["chunks"]?.intValue)
        // b fetches in the background (attach.get waits); it is killed once it holds some chunks.
        let fetch = Task { try? await b.request("attach.get", ["id": .string(id), "path": .string("\(cluster.dir)/first.bin")]) }
        var heldBeforeKill: Int64 = 0
        try await eventually("b to hold some chunks") {
            let list = try await b.request("attach.list")["attachments"]?.arrayValue ?? []
            heldBeforeKill = list.first { $0.objectValue?["id"]?.stringValue == id }?.objectValue?["have"]?.intValue ?? 0
            return heldBeforeKill > 0
        }
        kill(b.process.processIdentifier, SIGKILL)
        _ = try await b.waitForExit()
        fetch.cancel()

        let back = try await cluster.start("b", join: [a.addr])
        _ = try await back.request("attach.get", ["id": .string(id), "path": .string("\(cluster.dir)/second.bin")], within: 120)
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(cluster.dir)/second.bin")) == Data(original))
        let fetchedAfter = try #require(try await back.request("stats")["chunks_fetched"]?.intValue)
        #expect(fetchedAfter + heldBeforeKill <= total, "\(fetchedAfter) fetched after the restart, \(heldBeforeKill) of \(total) held before it")
        print("restart mid-fetch: \(heldBeforeKill) of \(total) chunks held before the kill, \(fetchedAfter) fetched after the restart")
    }

    @Test func sigtermStopsWithoutLeavingAndLeaveLeavesForGood() async throws {
        let cluster = try TestCluster("stop")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let collector = try await EventCollector.subscribe(a, topics: ["members"])
        b.process.terminate()
        #expect(try await b.waitForExit() == 0, "SIGTERM: \(b.log)")
        try await eventually("a to see b failed", within: 60) { try await state(of: b.member, at: a) == "failed" }
        #expect(await collector.memberChanges("left").isEmpty, "a stop is not a leave")
        #expect(FileManager.default.fileExists(atPath: "\(cluster.dir)/b.data/state.sqlite"), "the state is kept")

        let back = try await cluster.start("b", join: [a.addr])
        #expect(try await back.request("status")["member"]?.stringValue == b.member)
        #expect(try await back.request("status")["resumed"] == .bool(true))
        try await eventually("a to see b alive again") { try await state(of: b.member, at: a) == "alive" }

        _ = try await back.request("leave")
        #expect(try await back.waitForExit() == 0)
        try await eventually("a to see b left") { try await state(of: b.member, at: a) == "left" }
        #expect(!FileManager.default.fileExists(atPath: "\(cluster.dir)/b.data/state.sqlite"), "leave wipes the state")
        #expect(!FileManager.default.fileExists(atPath: "\(cluster.dir)/b.data/identity"), "and the identity made there")
        await collector.stop()
    }

    /// The journal and the activity value are kept: a member that comes back alone still knows
    /// them, holds its chunks, and shows no `added` or `activity` event twice.
    @Test func theJournalAndTheActivityValueAreKeptWithoutTheirEventsTwice() async throws {
        let cluster = try TestCluster("rejournal")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let atB = try await EventCollector.subscribe(b, topics: ["attachments", "activity"])
        let original = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2654435761 >> 9) }
        let kept = "\(cluster.dir)/kept.bin", gone = "\(cluster.dir)/gone.bin"
        try Data(original).write(to: URL(fileURLWithPath: kept))
        try Data(original.reversed()).write(to: URL(fileURLWithPath: gone))
        let keptID = try #require(try await a.request("attach.add", ["path": .string(kept)])["attachment"]?.objectValue?["id"]?.stringValue)
        let goneID = try #require(try await a.request("attach.add", ["path": .string(gone)])["attachment"]?.objectValue?["id"]?.stringValue)
        _ = try await b.request("attach.get", ["id": .string(keptID), "path": .string("\(cluster.dir)/first.bin")])
        _ = try await a.request("attach.remove", ["id": .string(goneID)])
        _ = try await a.request("activity.set", ["value": ["scene": "kept"]])
        // The subscriber is to have been sent both events (an event is sent once committed, a moment
        // after the value is in force): one it was not sent yet would come after the restart, once.
        try await eventually("b to see the removal and the activity value") {
            let removed = await atB.events.contains { $0["change"]?.stringValue == "removed" }
            let shown = await atB.events.contains { $0["event"]?.stringValue == "activity" }
            let activity = try await b.request("activity.get")["activity"]?.objectValue?["scene"]?.stringValue
            return removed && shown && activity == "kept"
        }
        let (_, cursor) = await atB.endedOnPurpose()

        // Both go down; b comes back alone: what it knows, it knows from its data directory.
        for node in [a, b] { kill(node.process.processIdentifier, SIGKILL) }
        for node in [a, b] { _ = try await node.waitForExit() }
        let back = try await cluster.start("b", join: [a.addr])
        #expect(try await back.request("status")["resumed"] == .bool(true))
        #expect(try await back.request("activity.get")["activity"]?.objectValue?["scene"]?.stringValue == "kept", "the activity value is kept")
        try await eventually("b to hold the kept attachment whole again") {
            let list = try await back.request("attach.list")["attachments"]?.arrayValue?.compactMap(\.objectValue) ?? []
            return list.contains { $0["id"]?.stringValue == keptID && $0["complete"] == .bool(true) }
        }
        let list = try await back.request("attach.list")["attachments"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(!list.contains { $0["id"]?.stringValue == goneID && $0["state"]?.stringValue != "removed" }, "a removal stays a removal: \(list)")
        _ = try await back.request("attach.get", ["id": .string(keptID), "path": .string("\(cluster.dir)/second.bin")])
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(cluster.dir)/second.bin")) == Data(original))
        #expect(try await back.request("stats")["chunks_fetched"]?.intValue == 0)
        let after = try await EventCollector.subscribe(back, topics: ["attachments", "activity"], since: cursor)
        try await Task.sleep(for: .milliseconds(300))  // room for a repeated event to show
        try await after.catchUp()
        let repeated = await after.events.filter { $0["event"]?.stringValue == "activity" || ["added", "removed", "complete"].contains($0["change"]?.stringValue ?? "") }
        #expect(repeated.isEmpty, "no event twice after the restart: \(repeated.map(\.serializedForLog))")
        await after.stop()
    }

    @Test func aSecondNodeOnADataDirectoryInUseIsRefusedInOneLine() async throws {
        let cluster = try TestCluster("dirlock")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let second = try await runCLI(["run", "--key", cluster.key, "--listen", "127.0.0.1:0", "--control", "\(cluster.dir)/second.sock",
                                       "--data-dir", "\(cluster.dir)/a.data"])
        #expect(second.status != 0)
        let lines = second.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("in use by another node"), "\(lines)")
        #expect(try await a.request("status")["member"]?.stringValue == a.member, "the running node is untouched")
    }

    /// A state file truncated, with a byte flipped, or filled with NULs: the node starts (never a
    /// crash, never a silent fresh start): either it resumes (the damage hit nothing it reads) or
    /// it says in one line what it found, keeps the file aside and starts as a new member.
    @Test(arguments: ["truncate", "flip", "nul"])
    func aDamagedStateIsNeverACrash(_ damage: String) async throws {
        let cluster = try TestCluster("torn-\(damage)")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        for i in 0..<20 { _ = try await a.request("send", ["text": .string("m\(i)")]) }
        a.process.terminate()
        #expect(try await a.waitForExit() == 0)
        let path = "\(cluster.dir)/a.data/state.sqlite"
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        var random = SystemRandomNumberGenerator()
        switch damage {
        case "truncate": bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &random)))
        case "flip": bytes[Int.random(in: 0..<bytes.count, using: &random)] ^= UInt8.random(in: 1...255, using: &random)
        default: bytes = [UInt8](repeating: 0, count: bytes.count)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let back = try await cluster.start("a", join: [])
        let status = try await back.request("status")
        let found = back.log.split(separator: "\n").filter { $0.contains("is damaged") }
        let aside = try FileManager.default.contentsOfDirectory(atPath: "\(cluster.dir)/a.data").filter { $0.hasPrefix("damaged-") }
        if status["resumed"] == .bool(true) {
            // The damage hit nothing the node reads (free pages, slack): everything is as it was.
            #expect(found.isEmpty && status["member"]?.stringValue == a.member)
            let replay = try await EventReplay.upToNow(try await back.client(), node: "a", from: 0, topics: ["messages"], within: 30)
            #expect(replay.compactMap { $0["text"]?.stringValue } == (0..<20).map { "m\($0)" }, "the event log as it was")
        } else {
            #expect(found.count == 1, "one line says what was found: \(back.log)")
            #expect(aside.count == 1, "the damaged file is kept aside")
            #expect(status["member"]?.stringValue != a.member, "a new member")
        }
        if damage == "nul" { #expect(status["resumed"] == .bool(false), "a state filled with NULs is found") }
    }
}
