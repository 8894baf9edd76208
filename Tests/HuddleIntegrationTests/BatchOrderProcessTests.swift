import Foundation
import HuddleControl
import HuddleTestSupport
import Testing

/// A full batch, flushed to make room, leaves before the batch that its next message opens (issue
/// 36: the directed relay test saw message 667 delivered before 652-666, one 256 KiB batch of 15,
/// over one link). A batch is flushed when the next message would not fit; that message is then
/// pending, and the commit the full batch waits for (with `--data-dir` a member's messages leave
/// only once committed) signs it too, as a batch of its own. The node held that batch ahead of the
/// full one, so a directed message (which has no seq to be put back in order by) overtook those
/// before it. The scheduled flush is delayed (the test-only `HUDDLE_TEST_FLUSH_DELAY_MS`) so that
/// sends one after another fill batches every time, as a busy node's do.
@Suite(.timeLimit(.minutes(5)))
struct BatchOrderProcessTests {
    @Test func aFullBatchLeavesBeforeTheBatchItsNextMessageOpens() async throws {
        let cluster = try TestCluster("batchorder")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a", environment: ["HUDDLE_TEST_FLUSH_DELAY_MS": "1500"])
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let atB = try await EventCollector.subscribe(b, topics: ["messages"])
        // 60 KB bodies: four fill a batch (256 KiB), the fifth opens the next; twelve make that
        // happen twice, each time with no commit in flight (nothing else is sent).
        let filler = String(repeating: "o", count: 60_000)
        let count = 12
        for i in 0..<count {
            _ = try await a.request("send", ["text": .string("order-\(i)-\(filler)"), "to": .array([.string(b.member)])])
        }
        func arrived() async -> [Int] {
            await atB.messages().compactMap { event -> Int? in
                guard let text = event["text"]?.stringValue, text.hasPrefix("order-") else { return nil }
                return Int(text.dropFirst("order-".count).prefix { $0 != "-" })
            }
        }
        try await eventually("b to deliver all \(count)", within: 60) { await arrived().count >= count }
        try await atB.catchUp()
        let got = await arrived()
        #expect(got == Array(0..<count), "each directed message once, in the order sent: \(got)")
        await atB.stop()
    }
}
