import HuddleTestSupport
@testable import HuddleNode
import Testing

/// Issue 40, item 2: the hops a message takes through a node are timed
/// (`huddle_message_hop_seconds{hop=…}`), so huddle-bench can say where a message waits.
@Suite struct MessageHopTests {
    /// Each broadcast made is timed until a batch through its seq leaves, each once; each event
    /// appended until it is shown; at most `limit` are kept (the oldest go first).
    @Test func stampsAreTakenOnceEachAndBounded() {
        var stamps = HopStamps()
        let start = ContinuousClock.now - .milliseconds(5)
        for seq in 1...3 { stamps.made.add(UInt64(seq), at: start) }
        var waits: [Duration] = []
        stamps.made.done(through: 2) { waits.append($0) }
        #expect(waits.count == 2 && waits.allSatisfy { $0 >= .milliseconds(5) })
        stamps.made.done(through: 2) { waits.append($0) }
        #expect(waits.count == 2, "a batch sent again (a repair) times nothing twice")
        stamps.made.done(through: 9) { waits.append($0) }
        #expect(waits.count == 3)

        let limit = StampQueue<Int64>.limit
        for cursor in 1...(limit + 10) { stamps.appended.add(Int64(cursor)) }
        var shown = 0
        stamps.appended.done(through: 10) { _ in shown += 1 }
        #expect(shown == 0, "the oldest ten went when the table was full")
        stamps.appended.done(through: .max) { _ in shown += 1 }
        #expect(shown == limit)
    }

    /// The ordinary lane's oldest item's wait is reported once per take that held ordinary items;
    /// a take of chunks alone reports none.
    @Test func anOutboxReportsHowLongItsOldestMessageWaited() async throws {
        let outbox = Outbox<Int>(batchBytes: 20, timed: true)
        outbox.push(1, bytes: 10, wake: false)
        try await Task.sleep(for: .milliseconds(20))
        outbox.push(2, bytes: 10, wake: false)
        outbox.push(3, bytes: 10, wake: false)
        #expect(await outbox.takeAll() == [1, 2])
        let wait = try #require(outbox.takeItemsWait())
        #expect(wait >= .milliseconds(20), "the oldest item's wait, not the newest's")
        #expect(outbox.takeItemsWait() == nil, "reported once")
        // What a take left behind is timed from its own push, not from that take.
        let backlog = Outbox<Int>(batchBytes: 10, timed: true)
        for i in 1...2 { backlog.push(i, bytes: 10, wake: false) }
        try await Task.sleep(for: .milliseconds(20))
        #expect(await backlog.takeAll() == [1])
        try await Task.sleep(for: .milliseconds(20))
        #expect(await backlog.takeAll() == [2])
        #expect(try #require(backlog.takeItemsWait()) >= .milliseconds(40), "queued before the first take, not timed from it")
        #expect(await outbox.takeAll() == [3])
        outbox.push(4, bytes: 10, bulk: true, wake: false)
        #expect(await outbox.takeAll() == [4])
        #expect(outbox.takeItemsWait() == nil, "chunks alone are not messages")
        // Without `timed` (no --metrics) nothing is timed.
        let untimed = Outbox<Int>()
        untimed.push(1, bytes: 10, wake: false)
        #expect(await untimed.takeAll() == [1])
        #expect(untimed.takeItemsWait() == nil)
    }

    /// What the node records is what a scrape shows, read back as huddle-bench reads it.
    @Test func hopsAreHistogramsInSecondsByHop() throws {
        let metrics = NodeMetrics()
        for ms in [1, 2, 2, 4, 40] { metrics.record(.commit, .milliseconds(ms)) }
        metrics.record(.linkRead, .microseconds(70))
        metrics.record(.core, .seconds(-1))
        metrics.commitWritten(.microseconds(300))
        let text = String(decoding: metrics.render(MetricsSnapshot()), as: UTF8.self)
        let hops = HistogramBuckets.parse(text, metric: "huddle_message_hop_seconds", label: "hop")
        #expect(Set(hops.keys) == Set(MessageHop.allCases.map(\.rawValue)), "every hop is served, observed or not")
        let commit = try #require(hops["commit"])
        #expect(commit.total == 5)
        #expect(commit.quantile(0.5).map { $0 > 0.001 && $0 <= 0.002 } == true, "\(commit)")
        #expect(commit.quantile(0.99).map { $0 > 0.025 && $0 <= 0.05 } == true, "\(commit)")
        #expect(hops["link_read"]?.quantile(0.5).map { $0 > 0.000_05 && $0 <= 0.000_1 } == true)
        #expect(hops["core"]?.buckets.first?.count == 1, "a negative wait (a clock read out of order) counts as 0")
        #expect(hops["send_hold"]?.total == 0)
        #expect(HistogramBuckets.parse(text, metric: "huddle_commit_seconds")[""]?.total == 1)
        // Two scrapes' difference, and two nodes added up.
        metrics.record(.commit, .milliseconds(40))
        let later = try #require(HistogramBuckets.parse(String(decoding: metrics.render(MetricsSnapshot()), as: UTF8.self),
                                                        metric: "huddle_message_hop_seconds", label: "hop")["commit"])
        #expect(later.since(commit).total == 1)
        #expect((later + commit).total == 11)
        #expect(HistogramBuckets().quantile(0.5) == nil)
    }
}
