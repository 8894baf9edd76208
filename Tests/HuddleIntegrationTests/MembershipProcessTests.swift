import Foundation
import HuddleTestSupport
import HuddleControl
import Testing

/// SWIM membership with real processes: 8 nodes on loopback, crashes, leaves, pauses, restarts.
@Suite(.timeLimit(.minutes(10)))
struct MembershipProcessTests {
    private func startEight(_ label: String) async throws -> (TestCluster, [TestNode]) {
        let cluster = try TestCluster(label)
        var nodes: [TestNode] = []
        for i in 0..<8 { nodes.append(try await cluster.start("n\(i)", extra: ["--identity", "\(cluster.dir)/n\(i).id"])) }
        try await cluster.waitForFullMesh(8)
        return (cluster, nodes)
    }

    private func subscribeAll(_ nodes: [TestNode]) async throws -> [EventCollector] {
        var collectors: [EventCollector] = []
        for node in nodes { collectors.append(try await EventCollector.subscribe(node, topics: ["members"])) }
        return collectors
    }

    private func changes(_ collector: EventCollector, _ change: String, about member: String) async -> Int {
        await collector.memberChanges(change).filter { $0["member"]?.objectValue?["member"]?.stringValue == member }.count
    }

    @Test func aKilledNodeIsReportedFailedByEveryOtherMember() async throws {
        let (cluster, nodes) = try await startEight("swimkill")
        defer { cluster.shutdown() }
        let collectors = try await subscribeAll(Array(nodes.dropFirst()))
        let victim = nodes[0]
        kill(victim.process.processIdentifier, SIGKILL)
        for (node, collector) in zip(nodes.dropFirst(), collectors) {
            try await eventually("\(node.name) to report the killed member failed", within: 60) {
                await changes(collector, "failed", about: victim.member) >= 1
            }
        }
        for collector in collectors { await collector.stop() }
    }

    @Test func aLeavingNodeIsReportedLeftNotFailed() async throws {
        let (cluster, nodes) = try await startEight("swimleave")
        defer { cluster.shutdown() }
        let collectors = try await subscribeAll(Array(nodes.dropFirst()))
        _ = try await nodes[0].request("leave")
        #expect(try await nodes[0].waitForExit() == 0)
        for (node, collector) in zip(nodes.dropFirst(), collectors) {
            try await eventually("\(node.name) to report the member left", within: 60) {
                await changes(collector, "left", about: nodes[0].member) >= 1
            }
            #expect(await changes(collector, "failed", about: nodes[0].member) == 0)
        }
        for collector in collectors { await collector.stop() }
    }

    @Test func aNodePausedForLessThanTheSuspicionTimeoutIsNeverFailed() async throws {
        let (cluster, nodes) = try await startEight("swimpause")
        defer { cluster.shutdown() }
        let collectors = try await subscribeAll(Array(nodes.dropFirst()))
        let paused = nodes[0]
        // Timed on a thread of its own: a `Task.sleep` here wakes late when the shared pool is busy.
        let stopped = await TestProcesses.pause(paused.process.processIdentifier, for: min(0.7, FailureDetector.safePause))
        #expect(stopped < FailureDetector.minimumSuspicion(members: 8), "the pause lasted \(stopped) s")
        // Let every suspicion that the pause may have started run out (a lone suspecter's lasts
        // the maximum timeout; one more probe period for the last to start), then look.
        try await Task.sleep(for: .seconds(FailureDetector.maximumSuspicion(members: 8) + FailureDetector.settings.probeInterval * 2))
        for (node, collector) in zip(nodes.dropFirst(), collectors) {
            try await collector.catchUp()
            #expect(await changes(collector, "failed", about: paused.member) == 0, "\(node.name) marked a member paused for \(stopped) s failed")
        }
        try await cluster.waitForFullMesh(8)
        for collector in collectors { await collector.stop() }
    }

    @Test func aRestartedNodeWithTheSameIdentityComesBackAsANewMember() async throws {
        let (cluster, nodes) = try await startEight("swimrestart")
        defer { cluster.shutdown() }
        let old = nodes[7]
        let oldNode = try await old.request("status")["node"]?.stringValue
        kill(old.process.processIdentifier, SIGKILL)
        _ = try await old.waitForExit()
        try await eventually("the others to see the killed member failed", within: 60) {
            let states = try await nodes[0].request("members")["members"]?.arrayValue ?? []
            return states.contains { $0.objectValue?["member"]?.stringValue == old.member && $0.objectValue?["state"]?.stringValue == "failed" }
        }
        let again = try await cluster.start("n7b", extra: ["--identity", "\(cluster.dir)/n7.id"])
        #expect(again.member != old.member)
        #expect(try await again.request("status")["node"]?.stringValue == oldNode)
        try await eventually("the restarted node to see 8 live members", within: 60) { try await again.aliveMembers() == 8 }
        try await eventually("n0 to list the new member alive and the old one failed", within: 60) {
            let list = try await nodes[0].request("members")["members"]?.arrayValue?.compactMap(\.objectValue) ?? []
            let new = list.first { $0["member"]?.stringValue == again.member }
            let gone = list.first { $0["member"]?.stringValue == old.member }
            return new?["state"]?.stringValue == "alive" && gone?["state"]?.stringValue == "failed" && new?["node"]?.stringValue == oldNode
        }
    }
}
