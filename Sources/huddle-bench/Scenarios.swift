import Foundation
import HuddleControl
import HuddleCore
import HuddleSim

/// The benchmark scenarios. Each starts real processes, measures, and stops them.
struct Scenarios {
    /// The latencies (ms) of the timestamped messages (`"<wall ns> …"`) a subscribed client gets
    /// until the `end` marker; then the client is closed.
    static func latencies(at client: ControlClient) async throws -> [Double] {
        var out: [Double] = []
        for try await event in await client.events() {
            let now = wallNanos()
            guard let text = event["text"]?.stringValue else { continue }
            if text == "end" { break }
            guard let sent = Int64(text.prefix { $0 != " " }) else { continue }
            out.append(Double(now - sent) / 1e6)
        }
        await client.close()
        return out
    }

    let huddle: String
    let quick: Bool

    // MARK: latency

    /// Delivery latency of 256 B reliable broadcasts at every member, through the control sockets.
    func latency(n: Int) async throws -> [BenchRow] {
        let cluster = try HuddleCluster(binary: huddle, label: "lat\(n)")
        defer { cluster.stop() }
        try await cluster.start(n)
        let count = quick ? 200 : 1000
        let samples = try await collectLatencies(cluster, count: count)
        var row = BenchRow(scenario: "latency N=\(n)", measure: "256 B broadcast, median / p99 ms",
                           huddle: "\(fmt(percentile(samples, 0.5))) / \(fmt(percentile(samples, 0.99)))", comparison: "serf: n/a", ratio: "", target: "")
        row.target = "target ≤ 2 / ≤ 10 ms: " + (percentile(samples, 0.5) <= 2 && percentile(samples, 0.99) <= 10 ? "met" : "missed")
        if SerfCluster.available {
            let count = quick ? 50 : 200
            let serf = try await serfLatency(n: n, count: count)
            row.comparison = "serf user events: \(fmt(percentile(serf, 0.5))) / \(fmt(percentile(serf, 0.99)))"
            if serf.count < (n - 1) * count { row.comparison += " (serf delivered \(serf.count) of \((n - 1) * count))" }
            row.ratio = "serf median ÷ huddle median = \(fmt(percentile(serf, 0.5) / percentile(samples, 0.5), 0))×"
        }
        return [row]
    }

    /// Sends up to `count` timestamped 256 B broadcasts from node 0, 5 ms apart, while `condition`
    /// holds, then an end marker; returns the latencies in milliseconds at every receiver (or at
    /// the nodes `receivers` names).
    func collectLatencies(_ cluster: HuddleCluster, count: Int, receivers: Set<Int>? = nil,
                          while condition: @escaping @Sendable () -> Bool = { true }) async throws -> [Double] {
        let sender = cluster.controls[0]
        return try await withThrowingTaskGroup(of: [Double].self) { group in
            for (i, control) in cluster.controls.enumerated().dropFirst() where receivers?.contains(i) ?? true {
                let client = try await ControlClient.connect(path: control)
                _ = try await client.request(.subscribe(topics: [.messages], since: nil))
                group.addTask { try await Self.latencies(at: client) }
            }
            let client = try await ControlClient.connect(path: sender)
            for _ in 0..<count where condition() {
                let stamp = "\(wallNanos()) "
                _ = try await client.request(.send(.init(body: Array((stamp + String(repeating: "x", count: 256 - stamp.count)).utf8), to: nil, reliable: true)))
                try await Task.sleep(for: .milliseconds(5))
            }
            _ = try await client.request(.send(.init(body: Array("end".utf8), to: nil, reliable: true)))
            await client.close()
            var all: [Double] = []
            for try await part in group { all += part }
            return all
        }
    }

    /// Repair traffic the run caused, per node (sender first): messages it retransmitted, and
    /// duplicates it received.
    func repairNote(_ cluster: HuddleCluster) async throws -> String {
        var retransmits: [String] = [], duplicates: [String] = []
        for control in cluster.controls {
            let stats = try await cluster.request(control, .stats).report
            retransmits.append("\(stats["retransmits"]?.intValue ?? 0)")
            duplicates.append("\(stats["duplicates"]?.intValue ?? 0)")
        }
        return ", retransmitted \(retransmits.joined(separator: "/")), duplicates \(duplicates.joined(separator: "/"))"
    }

    /// Peak RSS and CPU seconds of the cluster's nodes, read from /proc now.
    func usageNote(_ cluster: HuddleCluster) -> String {
        let usage = cluster.usage()
        return "peak RSS max \(fmt(usage.map(\.peakRSSMiB).max() ?? 0, 0)) MiB [\(usage.map { fmt($0.peakRSSMiB, 0) }.joined(separator: "/"))], CPU max \(fmt(usage.map(\.cpuSeconds).max() ?? 0, 1)) s per node"
    }

    private func serfLatency(n: Int, count: Int) async throws -> [Double] {
        let serf = try SerfCluster(label: "lat\(n)")
        defer { serf.stop() }
        try await serf.start(n)
        for i in 0..<count {
            _ = try serf.output(["event", "-rpc-addr=\(serf.rpc[0])", "-coalesce=false", "bench", "\(wallNanos()) \(i)"])
            try await Task.sleep(for: .milliseconds(20))
        }
        // Serf does not promise delivery of user events: wait up to 30 s for all of them, then
        // measure what arrived (the row says how many).
        var samples: [Double] = []
        try? await waitFor("serf events at every agent", seconds: 30) {
            samples = []
            for i in 1..<n {
                let lines = serf.events(i).filter { $0.contains(" user bench ") }
                for line in lines {
                    let parts = line.split(separator: " ")
                    if parts.count >= 4, let got = Int64(parts[0]), let sent = Int64(parts[3]) { samples.append(Double(got - sent) / 1e6) }
                }
            }
            return samples.count >= (n - 1) * count
        }
        guard !samples.isEmpty else { throw BenchError(description: "no serf user event reached any agent in 30 s") }
        return samples
    }

    // MARK: throughput

    /// One sender, three receivers: delivered messages per second at each receiver.
    func throughput(size: Int) async throws -> [BenchRow] {
        let cluster = try HuddleCluster(binary: huddle, label: "tp\(size)")
        defer { cluster.stop() }
        try await cluster.start(4)
        let count = size > 1024 ? (quick ? 2000 : 10000) : (quick ? 20000 : 100_000)
        // JSON lines (the default), then binary frames, on the same cluster.
        let worst = try await pipelinedRates(cluster, receivers: Array(cluster.controls.dropFirst()), size: size, count: count).rates.min() ?? 0
        let framed = try await pipelinedRates(cluster, receivers: Array(cluster.controls.dropFirst()), size: size, count: count, binary: true)
        let worstFramed = framed.rates.min() ?? 0
        let raw = try RawFanout.run(receivers: 3, size: size, count: count * (size > 1024 ? 5 : 10))
        let note = usageNote(cluster) + (try await repairNote(cluster))
        let binaryText = framed.binary ? "binary frames \(Int(worstFramed)) (\(fmt(worstFramed * Double(size) / 1e6, 1)) MB/s)" : "binary frames: not offered by this node"
        var target = ""
        if size <= 1024 {
            target = "target ≥ 120,000 lines: " + (worst >= 120_000 ? "met" : "missed by \(fmt(120_000 / max(worst, 1), 1))×")
                + "; ≥ 200,000 binary: " + (!framed.binary ? "not offered" : worstFramed >= 200_000 ? "met" : "missed by \(fmt(200_000 / max(worstFramed, 1), 1))×")
        }
        return [BenchRow(scenario: "throughput \(size) B", measure: "msgs/s at each of 3 receivers (min of 3): JSON lines; binary frames",
                         huddle: "JSON lines \(Int(worst)) (\(fmt(worst * Double(size) / 1e6, 1)) MB/s); \(binaryText); \(note)",
                         comparison: "raw TCP fan-out: \(Int(raw)) (\(fmt(raw * Double(size) / 1e6, 0)) MB/s)",
                         ratio: "huddle ÷ raw = \(fmt(worst / raw, 3)) lines" + (framed.binary ? ", \(fmt(worstFramed / raw, 3)) binary" : ""),
                         target: target)]
    }

    /// Node 0 sends `count` messages of `size` bytes, pipelined; messages per second at each of
    /// `receivers` (control paths), counted from their first event to their last; subscribed with
    /// `binary` frames when asked (`binary` in the result: every receiver's node took them).
    func pipelinedRates(_ cluster: HuddleCluster, receivers: [String], size: Int, count: Int, binary: Bool = false) async throws -> (rates: [Double], binary: Bool) {
        try await withThrowingTaskGroup(of: (rate: Double, binary: Bool).self) { group in
            for control in receivers {
                group.addTask { try await onThread { try RawEventCounter.rate(control: control, count: count, binary: binary) } }
            }
            try await Task.sleep(for: .milliseconds(300))
            let body = String(repeating: "y", count: size)
            let sender = cluster.controls[0]
            try await onThread { try PipelinedSender.send(to: sender, text: body, count: count) }
            var all: [Double] = []
            var framed = true
            for try await r in group {
                all.append(r.rate)
                framed = framed && r.binary
            }
            return (all, framed)
        }
    }

    // MARK: membership

    /// When a fault was seen, in seconds from it: the first `suspect` event about the member at any
    /// watcher, and the last watcher's `failed` event (the detection time).
    struct FailureSeen { var firstSuspect: Double?; var allFailed: Double }

    /// Seconds from `fault` until the last of `watchers` emits the `member` event saying `member`
    /// failed, and until the first of them suspected it. Every watcher is subscribed before the
    /// fault, and each event is timed as it arrives, so the figure does not include a polling round
    /// over the watchers' control sockets.
    func secondsUntilAllReportFailed(_ cluster: HuddleCluster, member: String, watchers: [Int],
                                     fault: () -> Void) async throws -> FailureSeen {
        var clients: [ControlClient] = []
        defer { for client in clients { Task { await client.close() } } }
        for w in watchers {
            let client = try await ControlClient.connect(path: cluster.controls[w])
            _ = try await client.request(.subscribe(topics: [.members], since: nil))
            clients.append(client)
        }
        let start = ContinuousClock.now
        fault()
        /// (first suspect, failed) as one watcher saw them.
        typealias Seen = (suspect: Double?, failed: Double)
        return try await withThrowingTaskGroup(of: Seen?.self) { group in
            for client in clients {
                group.addTask {
                    var suspect: Double?
                    for try await event in await client.events() {
                        guard event["event"]?.stringValue == "member",
                              event["member"]?.objectValue?["member"]?.stringValue == member else { continue }
                        let change = event["change"]?.stringValue
                        let now = (ContinuousClock.now - start).seconds
                        if change == "suspect", suspect == nil { suspect = now }
                        if change == "failed" { return (suspect, now) }
                    }
                    return nil
                }
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                throw BenchError(description: "timed out waiting for every member to report \(member) failed")
            }
            var seen = FailureSeen(firstSuspect: nil, allFailed: 0)
            for _ in clients {
                guard let one = try await group.next() ?? nil else {
                    throw BenchError(description: "a watcher's event stream ended before it reported \(member) failed")
                }
                seen.allFailed = max(seen.allFailed, one.failed)
                if let s = one.suspect { seen.firstSuspect = min(seen.firstSuspect ?? s, s) }
            }
            group.cancelAll()
            return seen
        }
    }

    /// Crash detection: time until every other member reports a killed (`kill -9`) member failed;
    /// then the same for frozen members (SIGSTOP, never resumed: their connections stay open, as
    /// when a host vanishes), which only probes can detect.
    func membership(n: Int) async throws -> [BenchRow] {
        let started = ContinuousClock.now
        let cluster = try HuddleCluster(binary: huddle, label: "mem\(n)")
        defer { cluster.stop() }
        try await cluster.start(n)
        let join = ContinuousClock.now - started
        let repeats = quick ? 2 : (n >= 24 ? 5 : 3)
        let freezes = quick ? 1 : (n >= 24 ? 5 : 2)
        var detections: [Double] = []
        var frozen: [FailureSeen] = []
        for r in 0..<(repeats + freezes) {
            let victim = n - 1 - r
            let watchers = Array(0..<victim)
            let member = cluster.members[victim]
            let d = try await secondsUntilAllReportFailed(cluster, member: member, watchers: watchers) {
                if r < repeats { cluster.kill(victim) } else { cluster.freeze(victim) }
            }
            if r < repeats { detections.append(d.allFailed) } else { frozen.append(d) }
        }
        let frozenSeconds = frozen.map(\.allFailed)
        // Where a frozen member's detection time goes: until the first probe of it failed (the
        // first suspicion anywhere), then the suspicion timeout.
        let firstSuspects = frozen.compactMap(\.firstSuspect)
        var row = BenchRow(scenario: "membership N=\(n)", measure: "crash (kill -9) seen failed by all, median / max s; frozen (SIGSTOP) member seen failed by all, median (each; first suspicion median); join (all see all)",
                           huddle: "\(fmt(percentile(detections, 0.5))) / \(fmt(detections.max() ?? .nan)); frozen \(fmt(percentile(frozenSeconds, 0.5))) s (\(frozenSeconds.map { fmt($0) }.joined(separator: ", ")); first suspicion \(firstSuspects.isEmpty ? "n/a" : fmt(percentile(firstSuspects, 0.5))) s); join \(fmt(join.seconds, 1)) s",
                           comparison: "serf: n/a", ratio: "", target: "")
        row.huddle += "; \(usageNote(cluster))"
        if SerfCluster.available {
            let (serf, serfJoin) = try await serfDetection(n: n, repeats: repeats)
            row.comparison = "serf (lan), kill -9: \(fmt(percentile(serf, 0.5))) / \(fmt(serf.max() ?? .nan)); join \(fmt(serfJoin, 1)) s"
            row.ratio = "serf ÷ huddle = \(fmt(percentile(serf, 0.5) / percentile(detections, 0.5), 1))× (frozen: \(fmt(percentile(serf, 0.5) / percentile(frozenSeconds, 0.5), 1))×)"
        }
        row.target = n == 24 ? "target ≤ 3 s median: " + (percentile(detections, 0.5) <= 3 ? "met" : "missed") + (percentile(frozenSeconds, 0.5) <= 3 ? " (frozen: met)" : " (frozen: missed)") : ""
        return [row]
    }

    private func serfDetection(n: Int, repeats: Int) async throws -> ([Double], Double) {
        let started = ContinuousClock.now
        let serf = try SerfCluster(label: "mem\(n)")
        defer { serf.stop() }
        try await serf.start(n)
        let join = (ContinuousClock.now - started).seconds
        var out: [Double] = []
        for r in 0..<repeats {
            let victim = n - 1 - r
            let start = ContinuousClock.now
            serf.kill(victim)
            try await waitFor("serf agents to report s\(victim) failed", seconds: 60) {
                (0..<victim).allSatisfy { i in serf.events(i).contains { $0.contains("member-failed") && $0.contains("s\(victim) ") } }
            }
            let d = ContinuousClock.now - start
            out.append(d.seconds)
        }
        return (out, join)
    }

    // MARK: attachments

    /// An attachment to N members: time until all complete, uploader bytes ÷ size, peak RSS, then
    /// a late joiner's throughput with the uploader gone; libtorrent and a raw copy on the same file.
    func attachment(n: Int, mib: Int) async throws -> [BenchRow] {
        let cluster = try HuddleCluster(binary: huddle, label: "att\(n)")
        defer { cluster.stop() }
        try await cluster.start(n)
        let size = mib << 20
        let source = try writeRandomFile("\(cluster.dir)/source.bin", mib: mib)
        // Every receiver's `complete` event (all chunks stored and verified: what libtorrent calls
        // finished) is watched from before the add. The exports (`attach.get`: decrypt, write the
        // plaintext file) start once all are complete and are timed on their own: libtorrent's
        // figure has no such second pass, and on this VM writing 700 MiB more of fresh page cache
        // while the transfer runs would be timed as transfer.
        var watchers: [ControlClient] = []
        for control in cluster.controls.dropFirst() {
            let client = try await ControlClient.connect(path: control)
            _ = try await client.request(.subscribe(topics: [.attachments], since: nil))
            watchers.append(client)
        }
        let started = ContinuousClock.now
        let completions = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in watchers {
                    group.addTask {
                        for try await e in await client.events() where e["change"]?.stringValue == "complete" { break }
                        await client.close()
                    }
                }
                try await group.waitForAll()
            }
            return (ContinuousClock.now - started).seconds
        }
        let id = try await cluster.request(cluster.controls[0], .attachAdd(path: source, name: nil, meta: .null)).attachment.id
        let dir = cluster.dir
        let seconds = try await completions.value
        let exportStart = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (i, control) in cluster.controls.enumerated().dropFirst() {
                group.addTask { _ = try await HuddleCluster.ask(control, .attachGet(id: id, path: "\(dir)/out\(i)", wait: true, timeoutMs: nil, mode: nil)) }
            }
            try await group.waitForAll()
        }
        let exported = (ContinuousClock.now - exportStart).seconds
        let sent = try await cluster.request(cluster.controls[0], .stats).report["bytes_sent"]?.objectValue?["chunks"]?.intValue ?? 0
        let note = usageNote(cluster)
        let rss = cluster.usage().map(\.peakRSSMiB).max() ?? 0
        // The uploader leaves; a new member joins through another and fetches from the rest.
        _ = try? await cluster.request(cluster.controls[0], .leave(timeoutMs: 10_000))
        try await cluster.add(joinVia: 1)
        let lateStart = ContinuousClock.now
        _ = try await cluster.request(cluster.controls[n], .attachGet(id: id, path: "\(dir)/late", wait: true, timeoutMs: 300_000, mode: nil))
        let lateSeconds = (ContinuousClock.now - lateStart).seconds
        let raw = try RawFanout.copy(path: source, receivers: n - 1)
        let ratio = Double(sent) / Double(size)
        var comparison = "raw TCP copy to each: \(fmt(raw)) s"
        var versus = ""
        do {
            if let plain = try libtorrent(path: source, peers: n, superSeeding: false),
               let superSeeded = try libtorrent(path: source, peers: n, superSeeding: true) {
                comparison += "; libtorrent: \(fmt(plain.seconds)) s, seeder \(fmt(plain.ratio)) ×; super-seeding \(fmt(superSeeded.seconds)) s, \(fmt(superSeeded.ratio)) ×"
                versus = "; libtorrent ÷ huddle = \(fmt(plain.seconds / seconds, 1))×"
                if n == 8 {
                    versus += " (target ≤ 2.5 s and ≥ 3× libtorrent: \(seconds <= 2.5 && plain.seconds / seconds >= 3 ? "met" : "missed"))"
                }
            } else {
                comparison += "; libtorrent: not installed (python3-libtorrent)"
            }
        } catch {
            comparison += "; libtorrent: \(error)"
        }
        return [BenchRow(scenario: "attachment \(mib) MiB, N=\(n)", measure: "all complete s (from attach.add; then every member's attach.get, started together, all files written in s more); uploader sent ÷ size; late joiner (uploader gone)",
                         huddle: "\(fmt(seconds)) s (then files written in \(fmt(exported)) s); \(fmt(ratio)) ×; late joiner \(fmt(Double(mib) / lateSeconds, 0)) MiB/s; \(note)",
                         comparison: comparison,
                         ratio: "huddle ÷ raw = \(fmt(seconds / raw, 1))×" + versus,
                         target: "uploader ≤ 1.2 ×: \(ratio <= 1.2 ? "met" : "missed"); RSS ≤ 64 MiB: \(rss <= 64 ? "met" : "missed (\(fmt(rss, 0)))")")]
    }

    // MARK: scale

    /// The membership simulator at growing N: detection time and per-member load.
    func scale() -> [BenchRow] {
        (quick ? [100, 1000] : [100, 1000, 10_000]).map { n in
            let started = ContinuousClock.now
            // N = 10,000 holds 10^8 member entries (every member knows every member): ~13 GB and
            // ~6 minutes here, so it simulates 35 s with 3 crashes; smaller N get 60 s and 5.
            var s = SimScenario(nodes: n, seed: 1, duration: n >= 10_000 ? 35 : 60)
            s.prejoined = n >= 1000
            s.loss = 0.01
            s.crashes = SimScenario.spreadCrashes(count: n >= 10_000 ? 3 : 5, nodes: n, from: 15, to: s.duration - 15, seed: 1)
            let r = Simulation.run(s)
            return BenchRow(scenario: "scale N=\(n) (simulator)", measure: "crash detection median / max s; false positives; msgs and B per member per s",
                            huddle: "\(fmt(r.detection.median ?? .nan)) / \(fmt(r.detection.max ?? .nan)); \(r.falsePositives) FP; \(fmt(r.messagesPerMemberSecond, 1)) msgs/s, \(Int(r.bytesPerMemberSecond)) B/s; \(fmt(s.duration, 0)) virtual s in \(fmt((ContinuousClock.now - started).seconds, 0)) s",
                            comparison: "", ratio: "", target: "")
        } + [sessionScale(), sessionReachScale()]
    }

    /// `SessionScenario.hundredMembersSixtyNATted`: the core's relay and punch rules at N = 100
    /// with 60 members behind NATs (issue 36).
    func sessionReachScale() -> BenchRow {
        let started = ContinuousClock.now
        let r = SessionSimulation.run(SessionScenario.hundredMembersSixtyNATted)
        let survivors = r.survivors.count
        let perSecond = Double(max(1, survivors)) * r.virtualSeconds
        let checked = r.violations.isEmpty ? "exactly once, causal" : "\(r.violations.count) violations"
        let whole = r.liveViews.values.filter { $0 == survivors }.count
        let unlinked = r.paths.values.reduce(0) { $0 + $1.none }
        let easy = r.paths["easy-easy"]
        return BenchRow(scenario: "session N=100, 60 NATted (simulator, SessionCore)",
                        measure: "30 easy + 30 hard NATs, \(r.sent) messages: delivery; views whole; left held / stored; pairs with no path; easy ↔ easy pairs punched direct at the end; punches succeeded of dialed; link msgs per member per s",
                        huddle: "\(checked) at \(survivors) survivors; \(whole) of \(survivors); \(r.held.max() ?? 0) / \(r.stored.max() ?? 0); \(unlinked); \(easy.map { "\($0.direct) of \($0.direct + $0.relayed + $0.none)" } ?? "none"); \(r.punchSuccesses) of \(r.punchAttempts); \(fmt(Double(r.linkMessages) / perSecond, 1)); \(fmt(r.virtualSeconds, 0)) virtual s in \(fmt((ContinuousClock.now - started).seconds, 0)) s",
                        comparison: "", ratio: "", target: "")
    }

    /// The whole session on `SessionCore` (what the node runs) at N = 100: messaging and a 20 MiB
    /// attachment together, with datagram loss, crashes and a partition long enough to fail members.
    func sessionScale() -> BenchRow {
        let started = ContinuousClock.now
        let s = SessionScenario.hundredMembersUnderFaults
        let r = SessionSimulation.run(s)
        let delays = s.crashes.compactMap { c in r.detection[c.member].flatMap { $0 }.map { $0 - c.at } }
        let complete = r.attachmentComplete.filter { r.survivors.contains($0.key) }.values.max().map { $0 - (s.attachment?.at ?? 0) }
        let perSecond = Double(max(1, r.survivors.count)) * r.virtualSeconds
        let checked = r.violations.isEmpty ? "exactly once, causal" : "\(r.violations.count) violations"
        return BenchRow(scenario: "session N=100 (simulator, SessionCore)",
                        measure: "5 % loss, 3 crashes, 10 members cut off 10 s, \(r.sent) messages + 20 MiB: delivery; crash seen failed by all, median s; attachment at every survivor s; datagrams, link msgs per member per s",
                        huddle: "\(checked) at \(r.survivors.count) survivors; \(fmt(SimReport.Spread(delays).median ?? .nan)) s; \(complete.map { fmt($0) } ?? "incomplete") s; \(fmt(Double(r.datagrams) / perSecond, 1)), \(fmt(Double(r.linkMessages) / perSecond, 1)); \(fmt(r.virtualSeconds, 0)) virtual s in \(fmt((ContinuousClock.now - started).seconds, 0)) s",
                        comparison: "", ratio: "", target: "")
    }
}
