import Foundation
import HuddleControl
import HuddleTestSupport
import HuddleSim
import Testing

/// One delivered message as a subscriber saw it.
struct Delivered: Equatable {
    let msg: String, from: String, seq: Int64?, deps: [String: Int64], text: String
    init?(_ event: JSONObject) {
        guard event["event"]?.stringValue == "message", let msg = event["msg"]?.stringValue, let from = event["from"]?.stringValue else { return nil }
        self.msg = msg
        self.from = from
        seq = event["seq"]?.intValue
        var deps: [String: Int64] = [:]
        for (k, v) in event["deps"]?.objectValue ?? [:] { deps[k] = v.intValue ?? 0 }
        self.deps = deps
        text = event["text"]?.stringValue ?? ""
    }

    var record: DeliveryRecord {
        DeliveryRecord(msg: msg, from: from, seq: seq.map { UInt64($0) }, deps: deps.mapValues { UInt64($0) })
    }
}

@Suite(.timeLimit(.minutes(10)))
struct MessagingProcessTests {
    @Test func concurrentSendersRepliesAndACrashKeepCausalExactlyOnceDelivery() async throws {
        let cluster = try TestCluster("causal")
        defer { cluster.shutdown() }
        var nodes: [TestNode] = []
        for name in ["s1", "s2", "s3", "answer"] { nodes.append(try await cluster.start(name)) }
        try await cluster.waitForFullMesh(4)
        var collectors: [EventCollector] = []
        for node in nodes { collectors.append(try await EventCollector.subscribe(node, topics: ["messages"])) }
        let answerer = nodes[3]
        let answerClient = try await answerer.client()
        let answerEvents = collectors[3]
        let replies = Task {
            var answered = Set<String>()
            while !Task.isCancelled {
                for d in await answerEvents.messages().compactMap(Delivered.init) where d.from != answerer.member && !answered.contains(d.msg) {
                    answered.insert(d.msg)
                    _ = try? await answerClient.ask("send", ["text": .string("re: \(d.text)")])
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        let perSender = 60
        let senders = Array(nodes.prefix(3))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, sender) in senders.enumerated() {
                group.addTask {
                    let client = try await sender.client()
                    for i in 0..<perSender {
                        _ = try await client.ask("send", ["text": .string("\(sender.name)-\(i)")])
                        if index == 2 && i == perSender / 2 {
                            kill(sender.process.processIdentifier, SIGKILL)
                            return
                        }
                    }
                    await client.close()
                }
            }
            try await group.waitForAll()
        }
        let survivors = [0, 1, 3]
        let expectedFromLive = 2 * perSender
        try await eventually("every survivor to deliver the live senders' messages and their replies", within: 60) {
            for i in survivors {
                let log = await collectors[i].messages().compactMap(Delivered.init)
                let originals = log.filter { $0.from == nodes[0].member || $0.from == nodes[1].member }.count
                let answers = log.filter { $0.from == answerer.member && ($0.text.hasPrefix("re: s1") || $0.text.hasPrefix("re: s2")) }.count
                if originals < expectedFromLive || answers < expectedFromLive { return false }
            }
            return true
        }
        replies.cancel()
        // Everything any survivor delivered from the crashed sender, every survivor delivers.
        try await eventually("survivors to agree on the crashed sender's messages", within: 30) {
            var sets: [Set<String>] = []
            for i in survivors { sets.append(Set(await collectors[i].messages().compactMap(Delivered.init).filter { $0.from == nodes[2].member }.map(\.msg))) }
            return sets.allSatisfy { $0 == sets[0] }
        }
        var problems: [String] = []
        var logs: [DeliveryLog] = []
        for i in survivors {
            let status = try await nodes[i].request("status")
            var baseline: [String: UInt64] = [:]
            for (k, v) in status["baseline"]?.objectValue ?? [:] { baseline[k] = UInt64(v.intValue ?? 0) }
            let log = await collectors[i].messages().compactMap(Delivered.init)
            logs.append(DeliveryLog(member: nodes[i].name, baseline: baseline, deliveries: log.map(\.record), stayed: true))
            // Replies after originals: a reply's text names its original, which must come first here.
            var delivered = Set<String>()
            for d in log {
                if d.text.hasPrefix("re: "), !delivered.contains(String(d.text.dropFirst(4))) {
                    problems.append("\(nodes[i].name): reply \"\(d.text)\" before its original")
                }
                delivered.insert(d.text)
            }
        }
        problems += DeliveryChecker.violations(logs)
        #expect(problems.isEmpty, "\(problems.prefix(10))")
        for collector in collectors { await collector.stop() }
        await answerClient.close()
    }

    @Test func activityConvergesEverywhereIncludingALateJoiner() async throws {
        let cluster = try TestCluster("activity")
        defer { cluster.shutdown() }
        var nodes: [TestNode] = []
        for name in ["a", "b", "c"] { nodes.append(try await cluster.start(name)) }
        try await cluster.waitForFullMesh(3)
        let setters = nodes
        try await withThrowingTaskGroup(of: Void.self) { group in
            for node in setters {
                group.addTask {
                    for i in 0..<10 { _ = try await node.request("activity.set", ["value": ["by": .string(node.name), "n": .int(Int64(i))]]) }
                }
            }
            try await group.waitForAll()
        }
        let late = try await cluster.start("late")
        let everyone = nodes + [late]
        try await eventually("every member, the late one included, to hold the same activity", within: 30) {
            var values: [JSON] = []
            for node in everyone {
                let reply = try await node.request("activity.get")
                values.append(.object(["activity": reply["activity"] ?? .null, "set_by": reply["set_by"] ?? .null]))
            }
            return values.allSatisfy { $0 == values[0] } && values[0].objectValue?["activity"] != .null
        }
        let big = String(repeating: "x", count: 17 * 1024)
        await #expect(throws: ControlError.self) { _ = try await nodes[0].request("activity.set", ["value": .string(big)]) }
    }

    @Test func oversizedMessagesAreRefusedWithTooLarge() async throws {
        let cluster = try TestCluster("toolarge")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let body = String(repeating: "y", count: 64 * 1024 + 1)
        await expectFailure(.tooLarge, what: "a body over 64 KiB") { _ = try await a.request("send", ["text": .string(body)]) }
        _ = try await a.request("send", ["text": .string(String(body.dropLast()))])
    }
}
