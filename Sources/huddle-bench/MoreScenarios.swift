import Foundation
import HuddleTestSupport
import HuddleControl
import HuddleCore
import HuddleCrypto
import Synchronization

extension Scenarios {
    // MARK: stability under CPU load

    /// Huddle and Serf clusters of `n` side by side while every core is kept busy by a CPU hog for
    /// `seconds`: every `failed` a live member is given is a false positive.
    func falsePositivesUnderLoad(n: Int, seconds: Int) async throws -> [BenchRow] {
        let cluster = try HuddleCluster(binary: huddle, label: "fp\(n)")
        defer { cluster.stop() }
        try await cluster.start(n)
        var subscriptions: [ControlClient] = []
        for control in cluster.controls {
            let client = try await ControlClient.connect(path: control)
            _ = try await client.request(.subscribe(topics: [.members], since: nil))
            subscriptions.append(client)
        }
        let counters = MemberChangeCounter()
        for client in subscriptions {
            Task { for try await e in await client.events() { await counters.add(e["change"]?.stringValue ?? "") } }
        }
        let serf: SerfCluster? = SerfCluster.available ? try SerfCluster(label: "fp\(n)") : nil
        defer { serf?.stop() }
        try await serf?.start(n)
        let hog = CPUHog(threads: ProcessInfo.processInfo.activeProcessorCount)
        try await Task.sleep(for: .seconds(seconds))
        hog.stop()
        try await Task.sleep(for: .seconds(2))
        let failed = await counters.count("failed") + counters.count("left")
        let suspected = await counters.count("suspect")
        for client in subscriptions { await client.close() }
        var alive = 0
        for control in cluster.controls { alive += Int(try await cluster.request(control, .status).status.members) }
        let serfFailed = serf.map { s in (0..<n).reduce(0) { $0 + s.events($1).filter { $0.contains("member-failed") }.count } }
        return [BenchRow(scenario: "false positives N=\(n), \(seconds) s, \(hog.threads) CPU-hog threads",
                         measure: "live members reported failed (suspect events)",
                         huddle: "\(failed) failed (\(suspected) suspect); \(usageNote(cluster))",
                         comparison: serfFailed.map { "serf (lan): \($0) member-failed" } ?? "serf: not installed",
                         ratio: "",
                         target: "target 0 false positives: " + (failed == 0 ? "met" : "missed"))]
    }

    // MARK: latency while an attachment transfers

    /// Broadcast latency at N = 4, idle and then while a `mib` MiB attachment goes to every member.
    func latencyDuringTransfer(mib: Int) async throws -> [BenchRow] {
        let n = 4
        let cluster = try HuddleCluster(binary: huddle, label: "latx", metrics: true)
        defer { cluster.stop() }
        try await cluster.start(n)
        let count = quick ? 200 : 600
        let atStart = try await hops(cluster)
        let idle = try await collectLatencies(cluster, count: count)
        let afterIdle = try await hops(cluster)
        let source = try writeRandomFile("\(cluster.dir)/source.bin", mib: mib)
        let controls = cluster.controls
        let dir = cluster.dir
        let done = DoneFlag()
        let transfer = Task {
            defer { done.set() }
            let started = ContinuousClock.now
            let id = try await HuddleCluster.ask(controls[1], .attachAdd(path: source, name: nil, meta: .null)).attachment.id
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (i, control) in controls.enumerated() where i != 1 {
                    group.addTask { _ = try await HuddleCluster.ask(control, .attachGet(id: id, path: "\(dir)/out\(i)", wait: true, timeoutMs: nil, mode: nil)) }
                }
                try await group.waitForAll()
            }
            return (ContinuousClock.now - started).seconds
        }
        // Probes only while the transfer runs: they stop when it completes.
        try await Task.sleep(for: .milliseconds(200))
        let loaded = try await collectLatencies(cluster, count: count, while: { !done.isSet })
        let afterLoaded = try await hops(cluster)
        let transferSeconds = try await transfer.value
        let p50 = percentile(loaded, 0.5), p99 = percentile(loaded, 0.99)
        return [hopRow(idle: (atStart, afterIdle), loaded: (afterIdle, afterLoaded), mib: mib), BenchRow(scenario: "latency N=4 during a \(mib) MiB attachment",
                         measure: "256 B broadcast median / p99 ms while chunks flow",
                         huddle: "\(fmt(p50)) / \(fmt(p99)) (\(loaded.count) samples; transfer to 3 members took \(fmt(transferSeconds, 1)) s)",
                         comparison: "same cluster idle: \(fmt(percentile(idle, 0.5))) / \(fmt(percentile(idle, 0.99)))",
                         ratio: "loaded ÷ idle median = \(fmt(p50 / percentile(idle, 0.5), 1))×",
                         target: "target ≤ 2 / ≤ 10 ms: " + (p50 <= 2 && p99 <= 10 ? "met" : "missed"))]
    }

    /// Every node's hop histograms (`MessageHop`), scraped now; none from a binary that serves none.
    private func hops(_ cluster: HuddleCluster) async throws -> [[String: HistogramBuckets]] {
        var all: [[String: HistogramBuckets]] = []
        for i in cluster.controls.indices { all.append(try await cluster.hopHistograms(i)) }
        return all
    }

    /// Where the probes' time went, hop by hop, in the idle and the loaded phase: the probe
    /// sender's hops (node 0: send_hold, link_queue) and the receivers' (nodes 1–3: link_read,
    /// core, commit, event_queue), and every node's commits' time on the I/O queue (commit_io),
    /// median / p99 ms of each phase's observations.
    private func hopRow(idle: ([[String: HistogramBuckets]], [[String: HistogramBuckets]]),
                        loaded: ([[String: HistogramBuckets]], [[String: HistogramBuckets]]), mib: Int) -> BenchRow {
        func phase(_ scrapes: ([[String: HistogramBuckets]], [[String: HistogramBuckets]])) -> String {
            let (before, after) = scrapes
            let hops: [(name: String, nodes: [Int])] = [("send_hold", [0]), ("link_queue", [0]), ("link_read", [1, 2, 3]),
                                                        ("core", [1, 2, 3]), ("commit", [1, 2, 3]), ("event_queue", [1, 2, 3]),
                                                        ("commit_io", [0, 1, 2, 3])]
            return hops.map { hop in
                let merged = hop.nodes.filter { $0 < after.count }.reduce(HistogramBuckets()) { sum, i in
                    sum + (after[i][hop.name]?.since(before.indices.contains(i) ? before[i][hop.name] : nil) ?? HistogramBuckets())
                }
                guard let p50 = merged.quantile(0.5), let p99 = merged.quantile(0.99) else { return "\(hop.name) none" }
                return "\(hop.name) \(fmt(p50 * 1000)) / \(fmt(p99 * 1000))"
            }.joined(separator: "; ")
        }
        return BenchRow(scenario: "latency N=4 during a \(mib) MiB attachment, by hop",
                        measure: "median / p99 ms of each hop (huddle_message_hop_seconds): the probe sender's send_hold and link_queue, the receivers' link_read, core, commit, event_queue; every node's commit_io (a commit's SQLite transaction, huddle_commit_seconds)",
                        huddle: "during the transfer: " + phase(loaded), comparison: "idle: " + phase(idle), ratio: "", target: "")
    }

    // MARK: crypto limit

    /// What this machine's libsodium does on one core for attachments: XChaCha20-Poly1305 sealing
    /// plus BLAKE2b-256 of each 256 KiB chunk (the uploader's work per byte).
    func cryptoLimit() -> [BenchRow] {
        let chunk = [UInt8](repeating: 7, count: 256 << 10)
        let key = SecureRandom.bytes(32)
        let total = quick ? 64 : 256
        var best = 0.0
        for _ in 0..<3 {
            let start = ContinuousClock.now
            var sink: UInt8 = 0
            for i in 0..<(total * 4) {
                let sealed = ChunkCipher.seal(chunk, index: i, key: key)
                sink ^= ChunkCipher.hash(sealed)[0]
            }
            let s = (ContinuousClock.now - start).seconds
            if sink == 1 { print("", terminator: "") }
            best = max(best, Double(total) / s)
        }
        return [BenchRow(scenario: "crypto limit (one core)", measure: "seal + hash of 256 KiB chunks, MiB/s (best of 3)",
                         huddle: "\(fmt(best, 0)) MiB/s: 100 MiB in \(fmt(100 / best, 2)) s", comparison: "", ratio: "", target: "")]
    }

    // MARK: libtorrent

    /// libtorrent (python3-libtorrent) with one seeder and n − 1 leechers on loopback, 256 KiB pieces.
    func libtorrent(path: String, peers: Int, superSeeding: Bool) throws -> (seconds: Double, ratio: Double)? {
        let script = BenchSetup.repository.appendingPathComponent("scripts/libtorrent_bench.py").path
        guard FileManager.default.fileExists(atPath: script), BenchSetup.libtorrentAvailable else { return nil }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = [script, "--file", path, "--peers", "\(peers)"] + (superSeeding ? ["--super-seeding"] : [])
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let line = String(decoding: data, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
        guard case let .object(o)? = try? JSON.parse(line) else { throw BenchError(description: "libtorrent: unreadable output \(line.prefix(200))") }
        if let error = o["error"]?.stringValue { throw BenchError(description: "libtorrent: \(error)") }
        guard let seconds = number(o["seconds"]), let ratio = number(o["ratio"]) else { throw BenchError(description: "libtorrent: \(line.prefix(200))") }
        return (seconds, ratio)
    }

    private func number(_ j: JSON?) -> Double? {
        switch j {
        case let .double(d)?: d
        case let .int(i)?: Double(i)
        default: nil
        }
    }
}

/// Counts member changes seen on subscriptions.
actor MemberChangeCounter {
    private var counts: [String: Int] = [:]
    func add(_ change: String) { counts[change, default: 0] += 1 }
    func count(_ change: String) -> Int { counts[change] ?? 0 }
}

/// A flag one task sets and others read.
final class DoneFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

/// Busy-looping threads that keep every core saturated until stopped.
final class CPUHog: Sendable {
    let threads: Int
    private let stopped = DoneFlag()

    init(threads: Int) {
        self.threads = threads
        for _ in 0..<threads {
            Thread.detachNewThread { [stopped] in
                var x: UInt64 = 1
                while !stopped.isSet { for _ in 0..<10_000 { x = x &* 6364136223846793005 &+ 1 } }
                if x == 0 { print("") }
            }
        }
    }

    func stop() { stopped.set() }
}

/// Writes `mib` MiB of random bytes to `path` and returns it.
func writeRandomFile(_ path: String, mib: Int) throws -> String {
    try HuddleTestSupport.writeRandomFile(path, count: mib << 20, seed: .random(in: .min ... .max))
    return path
}
