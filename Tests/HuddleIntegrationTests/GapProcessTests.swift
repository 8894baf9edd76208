import Foundation
import HuddleControl
import HuddleSim
import HuddleTestSupport
import Testing

/// CONTROL.md, Restart and `gap`: messages a member missed while it was down, past what the others
/// retain, are reported by exactly one `gap` event with the right range (in the seqs every member
/// gives those messages), and deliveries go on right after it.
@Suite(.timeLimit(.minutes(10)))
struct GapProcessTests {
    private func state(of member: String, at node: TestNode) async throws -> String? {
        let members = try await node.request("members")["members"]?.arrayValue?.compactMap(\.objectValue) ?? []
        return members.first { $0["member"]?.stringValue == member }?["state"]?.stringValue
    }

    @Test func messagesNobodyRetainsAnyMoreAreReportedByOneGapAndDeliveriesGoOnAfterIt() async throws {
        let cluster = try TestCluster("gap")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        let c = try await cluster.start("c")
        try await cluster.waitForFullMesh(3)
        let atB = try await EventCollector.subscribe(b, topics: ["messages"])
        let atC = try await EventCollector.subscribe(c, topics: ["messages"])
        _ = try await a.request("send", ["text": "before"])
        try await eventually("c to deliver the first message") { await atC.events.contains { $0["text"]?.stringValue == "before" } }
        let (seenAtC, resumeFrom) = await atC.endedOnPurpose()

        kill(c.process.processIdentifier, SIGKILL)
        _ = try await c.waitForExit()
        try await eventually("a and b to see c failed", within: 60) {
            let atA = try await state(of: c.member, at: a), atB = try await state(of: c.member, at: b)
            return atA == "failed" && atB == "failed"
        }
        // More than the others retain for a failed member (8 MiB): they stop keeping it for c.
        let big = String(repeating: "x", count: 60_000)
        for i in 0..<75 { _ = try await a.request("send", ["text": .string("big-\(i) " + big)]) }
        // A journal entry among them (not a message): the seqs after the gap must still match b's.
        let file = "\(cluster.dir)/small.bin"
        try Data("small".utf8).write(to: URL(fileURLWithPath: file))
        _ = try await a.request("attach.add", ["path": .string(file)])
        for i in 75..<150 { _ = try await a.request("send", ["text": .string("big-\(i) " + big)]) }
        for i in 0..<3 { _ = try await a.request("send", ["text": .string("after-\(i)")]) }
        try await eventually("a and b to store nothing for c any more", within: 60) {
            let stored = [try await a.request("stats")["messages_stored"]?.intValue, try await b.request("stats")["messages_stored"]?.intValue]
            guard stored.allSatisfy({ $0 == 0 }) else { throw TestTimeout(description: "stored at a and b: \(stored)") }
            return true
        }
        try await eventually("b to deliver all of a's messages") {
            await atB.events.filter { $0["from"]?.stringValue == a.member }.count == 154
        }
        let fromA = await atB.events.filter { $0["event"]?.stringValue == "message" && $0["from"]?.stringValue == a.member }
        let seqAtB = Dictionary(fromA.compactMap { e in e["text"]?.stringValue.map { (String($0.prefix(12)), e["seq"]?.intValue ?? -1) } },
                                uniquingKeysWith: { first, _ in first })
        let firstLost = try #require(seqAtB["big-0 " + String(repeating: "x", count: 6)])
        let lastLost = try #require(seqAtB["after-2"])

        let back = try await cluster.start("c", join: [a.addr])
        #expect(try await back.request("status")["resumed"] == .bool(true))
        let after = try await EventCollector.subscribe(back, topics: ["messages"], since: resumeFrom)
        try await eventually("c to report the gap", within: 60) { await after.events.contains { $0["event"]?.stringValue == "gap" } }
        for i in 0..<3 { _ = try await a.request("send", ["text": .string("late-\(i)")]) }
        try await eventually("c to deliver what a sent after its restart", within: 60) {
            await after.events.contains { $0["text"]?.stringValue == "late-2" }
        }
        try await eventually("b to deliver it too") { await atB.events.contains { $0["text"]?.stringValue == "late-2" } }
        try await Task.sleep(for: .milliseconds(300))  // room for a second gap or a duplicate to show
        try await after.catchUp()

        let events = seenAtC + (await after.events)
        let gaps = events.filter { $0["event"]?.stringValue == "gap" }
        #expect(gaps.count == 1, "exactly one gap event: \(gaps.map(\.serializedForLog))")
        let gap = try #require(gaps.first)
        #expect(gap["member"]?.stringValue == a.member)
        #expect(gap["from_seq"]?.intValue == firstLost && gap["to_seq"]?.intValue == lastLost,
                "the gap names a's messages \(firstLost)...\(lastLost) (b's seqs): \(gap.serializedForLog)")
        let late = events.filter { ($0["text"]?.stringValue ?? "").hasPrefix("late-") }.compactMap { $0["seq"]?.intValue }
        let lateAtB = await atB.events.filter { ($0["text"]?.stringValue ?? "").hasPrefix("late-") }.compactMap { $0["seq"]?.intValue }
        #expect(late == lateAtB && late.first == lastLost + 1, "deliveries go on right after the gap, numbered as at b: \(late) vs \(lateAtB)")
        #expect(!events.contains { ($0["text"]?.stringValue ?? "").hasPrefix("big-") }, "nothing of the gap is delivered")
        // 153 messages and the journal entry: every broadcast given up on is counted.
        #expect(try await back.request("stats")["broadcasts_lost"]?.intValue == 154)

        var baseline: [String: UInt64] = [:]
        for (k, v) in (try await back.request("status"))["baseline"]?.objectValue ?? [:] { baseline[k] = UInt64(v.intValue ?? 0) }
        let records = events.compactMap { e -> DeliveryRecord? in
            if e["event"]?.stringValue == "gap", let member = e["member"]?.stringValue,
               let from = e["from_seq"]?.intValue, let to = e["to_seq"]?.intValue, from >= 1, to >= from {
                return .gap(from: member, lost: UInt64(from)...UInt64(to))
            }
            return Delivered(e)?.record
        }
        let problems = DeliveryChecker.violations([DeliveryLog(member: "c", baseline: baseline, deliveries: records, stayed: true)])
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        await after.stop()
        await atB.stop()
    }
}
