import Foundation
import HuddleControl

// `--scenarios reach` (issue 36, item 7): members behind NAT routers in network namespaces on this
// machine — the NAT lab of the host tests. Lab/HostLab.swift, Lab/NATLab.swift, Lab/Shell.swift
// and Lab/ReachLab.swift are symbolic links to Tests/hosts: the benchmark builds the very lab the
// tests assert on (namespaces, nftables routers, `huddle run` in each), and judges "linked" by the
// same `ReachLab.pendingLink()`. Needs root (as the host tests do); without it the row says why.

/// `member` events of the nodes of a lab, each stamped as it reached the benchmark: how long a
/// pair took from knowing each other to a relayed path and on to a direct one.
actor MemberEventLog {
    struct Stamped: Sendable { let at: ContinuousClock.Instant; let change: String; let member: String; let path: String? }
    private var events: [String: [Stamped]] = [:]
    private var clients: [ControlClient] = []

    /// Subscribes to `node`'s member events now and keeps them until `stop()`.
    func watch(_ node: HostNode) async throws {
        let client = try await node.client()
        _ = try await client.request(.subscribe(topics: [.members], since: nil))
        clients.append(client)
        let name = node.name
        Task {
            do {
                for try await event in await client.events() {
                    let at = ContinuousClock.now
                    guard event["event"]?.stringValue == "member", let m = event["member"]?.objectValue else { continue }
                    self.add(name, Stamped(at: at, change: event["change"]?.stringValue ?? "", member: m["member"]?.stringValue ?? "",
                                           path: m["path"]?.stringValue))
                }
            } catch {}
        }
    }

    private func add(_ node: String, _ event: Stamped) { events[node, default: []].append(event) }

    func stop() async {
        for client in clients { await client.close() }
        clients = []
    }

    /// The upgrade of pair (`first`, `second`), `first` started before `second`: `known` is when
    /// `first` heard of `second` (its first event about it; `second` learned of `first` when it
    /// joined, earlier); `relayed` the first `path relayed` event at either end; `direct` when both
    /// ends had a `path direct` event after it. nil fields: not seen.
    func upgrade(_ first: HostNode, _ second: HostNode) -> (known: ContinuousClock.Instant?, relayed: ContinuousClock.Instant?, direct: ContinuousClock.Instant?) {
        let a = events[first.name, default: []].filter { $0.member == second.member }
        let b = events[second.name, default: []].filter { $0.member == first.member }
        let relayed = (a + b).filter { $0.change == "path" && $0.path == "relayed" }.map(\.at).min()
        var direct: ContinuousClock.Instant?
        if let relayed {
            let ends = [a, b].map { end in end.first { $0.change == "path" && $0.path == "direct" && $0.at > relayed }?.at }
            if let x = ends[0], let y = ends[1] { direct = max(x, y) }
        }
        return (a.first?.at, relayed, direct)
    }
}

extension Scenarios {
    func reach() async throws -> [BenchRow] {
        // The lab runs BuiltExecutables' `huddle`: the one this benchmark was told to run.
        setenv("HUDDLE_BIN", huddle, 1)
        if let reason = HostEnvironment.unusableReason {
            return [BenchRow(scenario: "reach", measure: "NAT lab in network namespaces", huddle: "not run: \(reason)", comparison: "", ratio: "", target: "")]
        }
        let formation = try await reachFormation()
        let direct = try await reachPair(.easy)
        let relayed = try await reachPair(.hard)
        var rows: [BenchRow] = []

        let (dMed, dP99, rMed, rP99) = (percentile(direct.latencies, 0.5), percentile(direct.latencies, 0.99),
                                        percentile(relayed.latencies, 0.5), percentile(relayed.latencies, 0.99))
        rows.append(BenchRow(
            scenario: "reach: 256 B latency", measure: "between two NATted members (sender → the other), median / p99 ms: direct (easy ↔ easy, punched) vs relayed (hard ↔ hard via the public member)",
            huddle: "relayed \(fmt(rMed)) / \(fmt(rP99)) (\(relayed.latencies.count) samples)\(relayed.note)",
            comparison: "direct \(fmt(dMed)) / \(fmt(dP99)) (\(direct.latencies.count) samples)\(direct.note)",
            ratio: "relayed − direct median = \(fmt(rMed - dMed)) ms",
            target: "relayed ≤ direct + 1 ms median: " + (rMed <= dMed + 1 ? "met" : "missed by \(fmt(rMed - dMed - 1)) ms"), memory: relayed.memory))
        rows.append(BenchRow(
            scenario: "reach: 16 KiB throughput", measure: "msgs/s delivered at the other NATted member, one pipelined sender: relayed vs direct",
            huddle: "relayed \(Int(relayed.rate)) (\(fmt(relayed.rate * 16384 / 1e6, 1)) MB/s; --relay-limit default 8 MiB/s per member)",
            comparison: "direct \(Int(direct.rate)) (\(fmt(direct.rate * 16384 / 1e6, 1)) MB/s)",
            ratio: "relayed ÷ direct = \(fmt(relayed.rate / max(direct.rate, 1e-9), 2))", target: "", memory: relayed.memory))
        if let cost = relayed.relayCost {
            rows.append(BenchRow(
                scenario: "reach: relay cost", measure: "the relaying (public) member while 100 MiB of broadcast messages go hard → hard through it (it receives them too): CPU s per relayed MiB; peak RSS",
                huddle: cost.text, comparison: "", ratio: "",
                target: "peak RSS ≤ 64 MiB: " + (cost.peakRSS <= 64 ? "met" : "missed (\(fmt(cost.peakRSS, 0)) MiB)") + (cost.delivered ? "" : "; not all delivered"), memory: relayed.memory))
        }
        if let cost = relayed.directedCost {
            rows.append(BenchRow(
                scenario: "reach: relay cost, directed", measure: "the same with 100 MiB of messages directed (`to`) hard → hard: the relay only forwards them (measured first, before the relay received anything as a member)",
                huddle: cost.text, comparison: "", ratio: "",
                target: "peak RSS ≤ 64 MiB: " + (cost.peakRSS <= 64 ? "met" : "missed (\(fmt(cost.peakRSS, 0)) MiB)") + (cost.delivered ? "" : "; not all delivered"), memory: relayed.memory))
        }
        rows.append(BenchRow(
            scenario: "reach: 5-host lab", measure: "from the first node's launch to all 5 (1 public, 2 easy, 2 hard) alive on their final paths in every view (easy ↔ easy direct, hard ↔ hard and easy ↔ hard relayed)",
            huddle: "\(fmt(formation.linked, 1)) s (one view at \(fmt(formation.view, 1)) s)", comparison: "", ratio: "",
            target: "≤ 10 s: " + (formation.linked <= 10 ? "met" : "missed by \(fmt(formation.linked - 10, 1)) s"), memory: formation.memory))
        let upgrades = [("5-host lab", formation.upgrade, formation.punches), ("3-host lab", direct.upgrade, direct.punches)]
        let worst = upgrades.compactMap { $0.1?.fromKnown }.max()
        rows.append(BenchRow(
            scenario: "reach: relay → direct", measure: "easy ↔ easy: from both members known to direct both ways (from the first relayed path event to direct both ways)",
            huddle: upgrades.map { "\($0.0): " + ($0.1.map { "\(fmt($0.fromKnown)) s (\(fmt($0.fromRelayed)) s)" } ?? "not seen") + ", \($0.2)" }.joined(separator: "; "),
            comparison: "", ratio: "",
            target: "≤ 2 s after both known: " + (worst.map { $0 <= 2 ? "met" : "missed (\(fmt($0)) s)" } ?? "not measured"), memory: formation.memory))
        return rows
    }

    /// Seconds from both known to direct, and from relayed to direct.
    struct Upgrade { let fromKnown: Double; let fromRelayed: Double }

    private func upgradeSeconds(_ log: MemberEventLog, _ first: HostNode, _ second: HostNode) async -> Upgrade? {
        let u = await log.upgrade(first, second)
        guard let known = u.known, let relayed = u.relayed, let direct = u.direct else { return nil }
        return Upgrade(fromKnown: (direct - known).seconds, fromRelayed: (direct - relayed).seconds)
    }

    /// The 5-host lab: seconds from the first launch to one view and to every pair on its final path.
    private func reachFormation() async throws -> (view: Double, linked: Double, upgrade: Upgrade?, punches: String, memory: String) {
        let log = MemberEventLog()
        let reach = try await ReachLab.start("bench5") { try await log.watch($0) }
        defer { reach.lab.teardown() }
        try await reach.lab.waitForOneView(reach.nodes, within: 120)
        let view = (ContinuousClock.now - reach.launched).seconds
        try await reach.waitUntilLinked(within: 120, every: .milliseconds(50))
        let linked = (ContinuousClock.now - reach.launched).seconds
        let upgrade = await upgradeSeconds(log, reach.nodes[ReachLab.easyPair.0], reach.nodes[ReachLab.easyPair.1])
        await log.stop()
        let punches = try await punchNote([reach.nodes[ReachLab.easyPair.0], reach.nodes[ReachLab.easyPair.1]])
        return (view, linked, upgrade, punches, memoryNote(reach.nodes))
    }

    struct PairResult {
        var latencies: [Double] = []
        var rate = 0.0
        var upgrade: Upgrade?
        var punches = ""
        var relayCost: (text: String, peakRSS: Double, delivered: Bool)?
        var directedCost: (text: String, peakRSS: Double, delivered: Bool)?
        var note = ""
        var memory = ""
    }

    /// A public member and two behind `router`s (easy: a punched direct pair; hard: a relayed
    /// one): 256 B latency and 16 KiB throughput from one of the pair to the other, the upgrade
    /// (easy), and the relay's cost over a 100 MiB attachment (hard).
    private func reachPair(_ router: Router) async throws -> PairResult {
        let log = MemberEventLog()
        let reach = try await ReachLab.start("bench\(router.rawValue)", routers: [.public, router, router]) { try await log.watch($0) }
        defer { reach.lab.teardown() }
        let (pub, a, b) = (reach.nodes[0], reach.nodes[1], reach.nodes[2])
        try await reach.waitUntilLinked(within: 120, every: .milliseconds(50))
        var result = PairResult()
        if router == .easy {
            result.upgrade = await upgradeSeconds(log, a, b)
            result.punches = try await punchNote([a, b])
        }
        await log.stop()
        if router == .hard {
            // What relaying alone costs, first: directed messages the relay only forwards, before the
            // rows below make it a receiver of 100 MiB of broadcasts itself (a process keeps its
            // heap's peak resident, so measured after them this row showed that member's cost).
            result.directedCost = try await relayCost(relay: pub, from: a, to: b, mib: quick ? 16 : 100, directed: true)
            try await reach.waitUntilLinked(within: 60, every: .milliseconds(50))
        }
        result.latencies = try await pairLatencies(from: a, to: b, count: quick ? 200 : 1000)
        result.rate = try await pairRate(from: a, to: b, size: 16384, count: quick ? 500 : 2000)
        if router == .hard {
            try await reach.waitUntilLinked(within: 60, every: .milliseconds(50))
            result.relayCost = try await relayCost(relay: pub, from: a, to: b, mib: quick ? 16 : 100, directed: false)
        }
        // The pair must still be on its path: a measure taken over another path says so.
        if let pending = try await reach.pendingLink() { result.note = " (after the measures: \(pending))" }
        result.memory = memoryNote(reach.nodes)
        return result
    }

    /// Punch dials and successes (`stats.relay.punch`) at each of `nodes`: "attempts/successes …".
    private func punchNote(_ nodes: [HostNode]) async throws -> String {
        var parts: [String] = []
        for node in nodes {
            let punch = try await node.request("stats")["relay"]?.objectValue?["punch"]?.objectValue ?? [:]
            parts.append("\(punch["attempts"]?.intValue ?? -1)/\(punch["successes"]?.intValue ?? -1)")
        }
        return "punch attempts/successes " + parts.joined(separator: ", ")
    }

    private func memoryNote(_ nodes: [HostNode]) -> String {
        let usage = nodes.compactMap { ProcessUsage(pid: $0.pid) }
        return "max \(fmt(usage.map(\.peakRSSMiB).max() ?? 0, 0)) MiB [\(usage.map { fmt($0.peakRSSMiB, 0) }.joined(separator: "/"))]"
    }

    /// Timestamped 256 B broadcasts from `sender`, 5 ms apart, then an end marker; the latencies
    /// (ms) at `receiver` (the lab's nodes share this machine's wall clock).
    private func pairLatencies(from sender: HostNode, to receiver: HostNode, count: Int) async throws -> [Double] {
        let rx = try await receiver.client()
        _ = try await rx.request(.subscribe(topics: [.messages], since: nil))
        return try await withThrowingTaskGroup(of: [Double].self) { group in
            group.addTask { try await Self.latencies(at: rx) }
            let tx = try await sender.client()
            for _ in 0..<count {
                let stamp = "\(wallNanos()) "
                _ = try await tx.request(.send(.init(body: Array((stamp + String(repeating: "x", count: 256 - stamp.count)).utf8), to: nil, reliable: true)))
                try await Task.sleep(for: .milliseconds(5))
            }
            _ = try await tx.request(.send(.init(body: Array("end".utf8), to: nil, reliable: true)))
            await tx.close()
            var all: [Double] = []
            for try await part in group { all += part }
            return all
        }
    }

    /// `count` pipelined messages of `size` bytes from `sender`; messages per second at `receiver`.
    private func pairRate(from sender: HostNode, to receiver: HostNode, size: Int, count: Int) async throws -> Double {
        let (from, to) = (sender.control, receiver.control)
        return try await withThrowingTaskGroup(of: Double.self) { group in
            group.addTask { try await onThread { try RawEventCounter.rate(control: to, count: count).rate } }
            try await Task.sleep(for: .milliseconds(300))
            let body = String(repeating: "y", count: size)
            try await onThread { try PipelinedSender.send(to: from, text: body, count: count) }
            var rate = 0.0
            for try await r in group { rate = r }
            return rate
        }
    }

    /// `mib` MiB as 16 KiB messages from `from`, pipelined, through `relay` to `to`: broadcast (the
    /// relay, a member too, also receives and delivers each one over its own link with `from`),
    /// or `directed` to `to` alone (then what the relay spends is what relaying costs). Returns the
    /// relay's CPU seconds over the bytes it forwarded meanwhile (`stats.relay.forwarded_bytes`),
    /// its peak RSS over the run (the kernel's peak reset just before: `5` to
    /// /proc/PID/clear_refs), and whether all arrived.
    private func relayCost(relay: HostNode, from: HostNode, to: HostNode, mib: Int, directed: Bool) async throws -> (text: String, peakRSS: Double, delivered: Bool) {
        func relayStats() async throws -> JSONObject { try await relay.request("stats")["relay"]?.objectValue ?? [:] }
        func forwarded() async throws -> Int64 { try await relayStats()["forwarded_bytes"]?.intValue ?? 0 }
        /// The relay's refusals by reason, those that are not zero.
        func refused() async throws -> String {
            let all = (try await relayStats()["refused"]?.objectValue ?? [:]).compactMap { k, v in (v.intValue ?? 0) > 0 ? "\(k) \(v.intValue ?? 0)" : nil }
            return all.isEmpty ? "none" : all.sorted().joined(separator: ", ")
        }
        let refusedBefore = try await refused()
        let before = ProcessUsage(pid: relay.pid)
        if let handle = FileHandle(forWritingAtPath: "/proc/\(relay.pid)/clear_refs") {
            handle.write(Data("5".utf8))
            try? handle.close()
        }
        // Just after the reset the kernel's peak is the resident set at this moment.
        let atStart = ProcessUsage(pid: relay.pid)?.peakRSSMiB ?? .nan
        let bytes0 = try await forwarded()
        let count = mib * 64
        let (sender, receiver, target) = (from.control, to.control, to.member)
        var outcome: String
        var delivered = false
        do {
            let rate = try await withThrowingTaskGroup(of: Double.self) { group in
                group.addTask { try await onThread { try RawEventCounter.rate(control: receiver, count: count).rate } }
                try await Task.sleep(for: .milliseconds(300))
                let body = String(repeating: "z", count: 16384)
                try await onThread { try PipelinedSender.send(to: sender, text: body, count: count, fields: directed ? #","to":["\#(target)"]"# : "") }
                var rate = 0.0
                for try await r in group { rate = r }
                return rate
            }
            delivered = true
            outcome = "all \(count) delivered at \(fmt(rate * 16384 / Double(1 << 20), 1)) MiB/s"
        } catch {
            outcome = "NOT all delivered: \(error)"
        }
        let relayedMiB = Double(try await forwarded() - bytes0) / Double(1 << 20)
        guard let before, let after = ProcessUsage(pid: relay.pid) else { throw BenchError(description: "cannot read the relay's /proc") }
        let cpu = after.cpuSeconds - before.cpuSeconds
        let text = "\(fmt(cpu / max(relayedMiB, 1e-9), 4)) CPU s per relayed MiB (\(fmt(cpu, 1)) s over \(fmt(relayedMiB, 0)) MiB forwarded); "
            + "peak RSS \(fmt(after.peakRSSMiB, 0)) MiB while relaying (resident \(fmt(atStart, 0)) MiB when it began, peak before it \(fmt(before.peakRSSMiB, 0)) MiB); "
            + "\(mib) MiB as \(count) \(directed ? "directed" : "broadcast") 16 KiB messages hard → hard: \(outcome); relay refused before: \(refusedBefore), after: \(try await refused())"
        return (text, after.peakRSSMiB, delivered)
    }
}
