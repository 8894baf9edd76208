import Foundation
import HuddleControl
import HuddleTestSupport
import Testing

/// Issue 35, item 4: nothing blocking on the node's actor. With every commit of the data
/// directory's state slowed to `delay` (the test-only `HUDDLE_TEST_COMMIT_DELAY_MS`: a slow
/// disk), the node answers its control socket while commits are in flight, its broadcasts still
/// leave only once a commit holds them (CONTROL.md, Restart: the write-ahead), and what is sent
/// meanwhile goes in a few commits, not one per message.
@Suite(.timeLimit(.minutes(10)))
struct SlowDiskProcessTests {
    static let delay = Duration.milliseconds(3000)

    @Test func aSlowCommitHoldsTheBroadcastButNotTheControlSocket() async throws {
        let cluster = try TestCluster("slowdisk")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a", environment: ["HUDDLE_TEST_COMMIT_DELAY_MS": "\(Self.delay.components.seconds * 1000)"])
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let atB = try await EventCollector.subscribe(b, topics: ["messages"])
        let texts = { (events: [JSONObject]) in events.compactMap { $0["text"]?.stringValue } }

        let sent = ContinuousClock.now
        _ = try await a.request("send", ["text": "first"])
        // The commit that holds it takes `delay`: `status` answers meanwhile, in its usual time.
        var slowest = Duration.zero, asked = 0
        while ContinuousClock.now - sent < Self.delay / 2 {
            let start = ContinuousClock.now
            _ = try await a.request("status")
            slowest = max(slowest, ContinuousClock.now - start)
            asked += 1
            try await Task.sleep(for: .milliseconds(50))
        }
        print("slow disk: \(asked) status requests during a \(Self.delay) commit, the slowest answered in \(slowest)")
        #expect(slowest < Self.delay / 3, "status waited for the commit: \(slowest)")
        // Write-ahead: b cannot have it before the commit that holds it completed.
        try await atB.catchUp()
        let looked = ContinuousClock.now
        if looked - sent < Self.delay {
            #expect(!texts(await atB.messages()).contains("first"), "a's message left before the commit holding it completed")
        } else {
            print("slow disk: b was asked only \(looked - sent) after the send (a loaded machine): the early-leave check is not made")
        }
        try await eventually("b to deliver a's message once committed", within: 60) { texts(await atB.messages()).contains("first") }

        // A burst while commits are slow: it goes out with a few commits (each taking `delay`),
        // all of it, in order.
        let burst = (0..<20).map { "burst-\($0)" }
        let started = ContinuousClock.now
        for text in burst { _ = try await a.request("send", ["text": .string(text)]) }
        try await eventually("b to deliver the burst", within: 60) { texts(await atB.messages()).filter { $0.hasPrefix("burst-") }.count >= burst.count }
        print("slow disk: a burst of \(burst.count) messages reached b in \(ContinuousClock.now - started)")
        #expect(texts(await atB.messages()).filter { $0.hasPrefix("burst-") } == burst, "each once, in order")
        #expect(ContinuousClock.now - started < Self.delay * 10, "not one commit per message")
        await atB.stop()
    }
}
