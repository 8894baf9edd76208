import HuddleCore
@testable import HuddleNode
import Testing

/// The series a scrape renders mirror the node's own totals: a counter shows the total itself,
/// however often it is scraped (nothing is counted twice), and gauges show the value now.
@Suite struct NodeMetricsTests {
    func value(_ text: String, _ series: String) -> String? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.map { String($0.dropFirst(series.count + 1)) }
    }

    @Test func countersShowTheTotalsHoweverOftenTheyAreScraped() {
        let metrics = NodeMetrics()
        var snapshot = MetricsSnapshot()
        snapshot.messagesDelivered = 5
        snapshot.sentBytes[.gossip] = 100
        snapshot.refusals.add(.keyChange, 2)
        snapshot.memberEvents[.suspect] = 1
        snapshot.members[.alive] = 3
        snapshot.links = 2
        _ = metrics.render(snapshot)
        var text = String(decoding: metrics.render(snapshot), as: UTF8.self)
        #expect(value(text, "huddle_messages_delivered_total") == "5")
        #expect(value(text, "huddle_sent_bytes_total{kind=\"gossip\"}") == "100")
        #expect(value(text, "huddle_refusals_total{reason=\"key_change\"}") == "2")
        #expect(value(text, "huddle_member_events_total{change=\"suspect\"}") == "1")
        #expect(value(text, "huddle_members{state=\"alive\"}") == "3.0")
        snapshot.messagesDelivered = 12
        snapshot.links = 1
        text = String(decoding: metrics.render(snapshot), as: UTF8.self)
        #expect(value(text, "huddle_messages_delivered_total") == "12")
        #expect(value(text, "huddle_links") == "1.0")
    }

    @Test func theHistogramsAreInSeconds() {
        let metrics = NodeMetrics()
        metrics.probeRoundTrip.recordNanoseconds(3_000_000)
        let text = String(decoding: metrics.render(MetricsSnapshot()), as: UTF8.self)
        #expect(value(text, "huddle_probe_rtt_seconds_bucket{le=\"0.0025\"}") == "0")
        #expect(value(text, "huddle_probe_rtt_seconds_bucket{le=\"0.005\"}") == "1")
        #expect(value(text, "huddle_probe_rtt_seconds_count") == "1")
    }
}
