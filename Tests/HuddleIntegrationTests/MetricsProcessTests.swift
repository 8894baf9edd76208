import Foundation
import HuddleControl
import HuddleTestSupport
import Testing

/// `huddle run --metrics`: a real Prometheus server scrapes a 3-node session every second; its
/// HTTP API shows every series family, and the counters move as messages go round; and
/// `promtool check metrics` finds nothing wrong with what a node serves.
@Suite struct MetricsProcessTests {
    /// Every series family a node serves (the histograms as their `_count`).
    static let families = [
        "huddle_members", "huddle_local_health_score", "huddle_links", "huddle_holdback_bytes", "huddle_holdback_messages",
        "huddle_message_store_bytes", "huddle_chunk_store_bytes", "huddle_chunk_store_limit_bytes", "huddle_event_subscribers", "huddle_epoch",
        "huddle_probes_sent_total", "huddle_probes_failed_total", "huddle_member_events_total",
        "huddle_messages_sent_total", "huddle_messages_delivered_total", "huddle_messages_retransmitted_total", "huddle_messages_forged_total",
        "huddle_event_overflows_total", "huddle_chunks_served_total", "huddle_chunks_fetched_total", "huddle_chunks_verified_total",
        "huddle_chunks_corrupt_total", "huddle_sent_bytes_total", "huddle_received_bytes_total", "huddle_sent_datagrams_total",
        "huddle_received_datagrams_total", "huddle_refusals_total", "huddle_handshake_failures_total", "huddle_dropped_frames_total",
        "huddle_dropped_datagrams_total", "huddle_probe_rtt_seconds_count", "huddle_message_delivery_latency_seconds_count",
        "huddle_message_hop_seconds_count", "huddle_commit_seconds_count",
    ]

    @Test func prometheusScrapesASessionAndItsSeriesMove() async throws {
        // Both before any node starts: a missing binary fails the test at once, saying how to get it.
        let promtool = try PrometheusServer.tool("promtool")
        _ = try PrometheusServer.tool("prometheus")
        let cluster = try TestCluster("metrics")
        defer { cluster.shutdown() }
        var nodes: [TestNode] = []
        for name in ["a", "b", "c"] { nodes.append(try await cluster.start(name, extra: ["--metrics", "127.0.0.1:0"])) }
        try await cluster.waitForFullMesh(3)
        var targets: [String] = []
        for node in nodes {
            var target = ""
            try await eventually("\(node.name) to log its metrics address") {
                guard let range = node.log.range(of: #"serving metrics at http://127\.0\.0\.1:\d+/metrics"#, options: .regularExpression) else { return false }
                target = String(node.log[range].dropFirst("serving metrics at http://".count).dropLast("/metrics".count))
                return true
            }
            targets.append(target)
        }

        // The raw output, as promtool sees it.
        let port = Int(targets[0].split(separator: ":")[1]) ?? 0
        let raw = try await httpGet(port: port, "/metrics")
        #expect(raw.status == 200)
        for family in Self.families { #expect(raw.body.contains("\n\(family)") || raw.body.hasPrefix(family), "\(family) is served") }
        #expect(raw.body.contains("huddle_members{state=\"alive\"} 3"), "\(raw.body)")
        #expect(try await httpGet(port: port, "/other").status == 404)
        let file = "\(cluster.dir)/metrics.txt"
        try raw.body.write(toFile: file, atomically: true, encoding: .utf8)
        let check = try await runTool(promtool, ["check", "metrics"], stdin: file)
        #expect(check.status == 0, "promtool check metrics: \(check.output)")

        let prometheus = try await PrometheusServer.start(in: cluster.dir, targets: targets)
        defer { prometheus.stop() }
        do {
            try await eventually("prometheus to scrape the 3 nodes", within: 60) {
                try await prometheus.query("up{job=\"huddle\"} == 1").count == 3
            }
            try await eventually("every node to report 3 members alive and 2 links", within: 30) {
                let alive = try await prometheus.query("huddle_members{state=\"alive\"} == 3").count
                let links = try await prometheus.query("huddle_links >= 2").count
                return alive == 3 && links == 3
            }
            for family in Self.families {
                let series = try await prometheus.query(family)
                #expect(Set(series.compactMap { $0.labels["instance"] }) == Set(targets), "\(family) from every node: \(series)")
            }
            #expect(try await prometheus.query("huddle_refusals_total").count == 3 * (try await prometheus.query("huddle_refusals_total{instance=\"\(targets[0])\"}").count))

            // Messages delivered, before and after: each of the 3 nodes delivers every message sent.
            var before = 0.0
            try await eventually("a first figure of messages delivered") {
                let series = try await prometheus.query("sum(huddle_messages_delivered_total)")
                guard let value = series.first?.value, !value.isNaN else { return false }
                before = value
                return true
            }
            let sent = 5
            for i in 1...sent { _ = try await nodes[0].request("send", ["text": .string("metrics-\(i)")]) }
            try await eventually("messages delivered to rise by \(3 * sent) in Prometheus", within: 30) {
                (try await prometheus.query("sum(huddle_messages_delivered_total)").first?.value ?? 0) >= before + Double(3 * sent)
            }
            #expect((try await prometheus.query("huddle_messages_sent_total{instance=\"\(targets[0])\"}").first?.value ?? 0) >= Double(sent))
            try await eventually("delivery latencies of the other nodes to be observed", within: 30) {
                try await prometheus.query("huddle_message_delivery_latency_seconds_count > 0").count >= 2
            }
            // Issue 40, item 2: each hop of a message is timed where it happens (every node here
            // has a data directory, so the commits are timed too).
            let sender = targets[0]
            let hops = [
                "huddle_message_hop_seconds_count{hop=\"send_hold\",instance=\"\(sender)\"} >= \(sent)": 1,
                "huddle_message_hop_seconds_count{hop=~\"link_queue|event_queue\",instance=\"\(sender)\"} > 0": 2,
                "huddle_message_hop_seconds_count{hop=~\"link_read|core|commit\",instance!=\"\(sender)\"} > 0": 6,
                "huddle_commit_seconds_count > 0": 3,
            ]
            try await eventually("each hop of the messages to be timed where it happens", within: 30) {
                for (query, count) in hops where try await prometheus.query(query).count != count { return false }
                return true
            }
            try await eventually("probes, their round trips and gossip bytes to move", within: 30) {
                let probes = try await prometheus.query("increase(huddle_probes_sent_total[5s]) > 0").count
                let rtts = try await prometheus.query("huddle_probe_rtt_seconds_count > 0").count
                let gossip = try await prometheus.query("huddle_sent_bytes_total{kind=\"gossip\"} > 0").count
                return probes == 3 && rtts == 3 && gossip == 3
            }
            // Every query of the Grafana dashboard runs on these series, and the panels of the
            // figures that moved above show data.
            for (title, expression) in try Self.dashboardQueries() {
                let promQL = expression.replacingOccurrences(of: "$instance", with: ".*").replacingOccurrences(of: "$__rate_interval", with: "10s")
                let series = try await prometheus.query(promQL)
                if ["Members alive", "Links", "Probe round trip", "Messages per second", "Bytes sent by kind"].contains(title) {
                    #expect(!series.isEmpty, "the dashboard's \(title) shows data: \(promQL)")
                }
            }
        } catch {
            Issue.record("\(error)\nprometheus:\n\(prometheus.log)\n\(cluster.logs)")
        }
    }
}

extension MetricsProcessTests {
    /// Each panel's title and PromQL queries in examples/grafana/huddle.json.
    static func dashboardQueries() throws -> [(title: String, expression: String)] {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("examples/grafana/huddle.json").path
        let dashboard = try JSONSerialization.jsonObject(with: try Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any] ?? [:]
        var queries: [(String, String)] = []
        for panel in dashboard["panels"] as? [[String: Any]] ?? [] {
            for target in panel["targets"] as? [[String: Any]] ?? [] {
                if let expression = target["expr"] as? String { queries.append((panel["title"] as? String ?? "", expression)) }
            }
        }
        guard queries.count >= 20 else { throw TestTimeout(description: "\(path) holds \(queries.count) queries") }
        return queries
    }
}

/// Runs `tool arguments` with `stdin` read from a file, to its end: its status and output (stdout and stderr).
private func runTool(_ tool: String, _ arguments: [String], stdin path: String) async throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    process.standardInput = FileHandle(forReadingAtPath: path)
    let out = TestProcesses.pipe()
    process.standardOutput = out
    process.standardError = out
    try TestProcesses.launch(process)
    let status = await process.exitStatus()
    return (status, String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
}
