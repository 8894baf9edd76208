import ArgumentParser
import Foundation
import HuddleCore
import HuddleSim

/// `huddle-sim`: deterministic simulations of Huddle's protocol cores. The same seed gives the same
/// run in every process; `--trace-digest` prints a digest of the whole run to check it.
struct HuddleSimCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "huddle-sim",
        abstract: "Deterministic simulations of Huddle's protocol cores (membership by default).",
        subcommands: [MembershipCommand.self, BroadcastCommand.self, SessionCommand.self],
        defaultSubcommand: MembershipCommand.self)
}

/// Rows of a report as two aligned columns.
func aligned(_ rows: [(String, String)]) -> String {
    let width = rows.map(\.0.count).max() ?? 0
    return rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
}

/// Prints the `--trace-digest` line: the digest, then the number of records.
func printTraceDigest(_ digest: String?, _ records: Int?) {
    print("\(digest ?? "-") \(records ?? 0) records")
}

/// `huddle-sim membership`: runs the real SWIM + Lifeguard instance for N simulated members and
/// prints the membership figures (join convergence, crash detection, false positives, load).
struct MembershipCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "membership",
        abstract: "Simulate SWIM + Lifeguard membership: joins, crashes, pauses, partitions, leaves.")

    @Option(help: "Number of members.") var nodes = 24
    @Option(help: "Random seed (same seed, same run).") var seed: UInt64 = 1
    @Option(help: "Virtual seconds to simulate.") var duration = 60.0
    @Option(help: "Datagram loss probability (0...1).") var loss = 0.0
    @Option(help: "One-way delay in milliseconds.") var delayMs = 1.0
    @Option(help: "Uniform extra delay in milliseconds (reorders datagrams).") var jitterMs = 2.0
    @Option(help: "Members join at random times within this many seconds.") var joinWindow = 5.0
    @Flag(help: "Start everyone already joined (steady state; for large N).") var prejoined = false
    @Option(help: "With --prejoined: members that join during the run.") var lateJoins = 5
    @Option(help: "Measure traffic from this virtual time on (default: after joins settle).") var measureFrom: Double?
    @Option(help: "Crashes of random members, spread over the run after the joins.") var crashes = 0
    @Option(help: "Pauses (SIGSTOP-like) of random members.") var pauses = 0
    @Option(help: "Length of each pause in seconds.") var pauseSeconds = 1.0
    @Option(help: "A 50/50 partition as START:END seconds, e.g. 20:40.") var partition: String?
    @Option(help: "Graceful leaves of random members.") var leaves = 0
    @Option(help: "Override the probe interval (s).") var probeInterval: Double?
    @Option(help: "Override the probe timeout (s).") var probeTimeout: Double?
    @Option(help: "Override suspicion alpha.") var alpha: Double?
    @Option(help: "Override suspicion beta.") var beta: Double?
    @Flag(help: "Print the report as JSON.") var json = false
    @Flag(help: "Print only a digest of the whole trace (every datagram delivered, membership change and fault, with its virtual time) and its record count: equal seeds give equal digests in any process.")
    var traceDigest = false

    func run() throws {
        var settings = SWIMSettings.lan
        if let probeInterval { settings.probeInterval = probeInterval }
        if let probeTimeout { settings.probeTimeout = probeTimeout }
        if let alpha { settings.suspicionAlpha = alpha }
        if let beta { settings.suspicionBeta = beta }

        var scenario = SimScenario(nodes: nodes, seed: seed, duration: duration)
        scenario.loss = loss
        scenario.delay = delayMs / 1000
        scenario.jitter = jitterMs / 1000
        scenario.joinWindow = joinWindow
        scenario.measureFrom = measureFrom ?? min(duration / 2, (prejoined ? 0 : joinWindow) + 10)
        scenario.prejoined = prejoined
        let lateCount = prejoined ? max(0, min(lateJoins, nodes - 1)) : 0
        scenario.lateJoins = (0..<lateCount).map { 5 + Double($0) * 2 }
        scenario.settings = settings
        let eventsFrom = (prejoined ? 5 + Double(lateCount) * 2 : joinWindow) + 10, eventsTo = max(eventsFrom, duration - 20)
        scenario.crashes = SimScenario.spreadCrashes(count: crashes, nodes: nodes - lateCount, from: eventsFrom, to: eventsTo, seed: seed)
        var rng = SWIMRandom(seed: seed ^ 0x9A05E)
        let crashed = Set(scenario.crashes.map(\.node))
        var others = (1..<max(1, nodes - lateCount)).filter { !crashed.contains($0) }
        others.shuffle(using: &rng)
        for k in 0..<min(pauses, others.count) {
            let at = eventsFrom + (eventsTo - eventsFrom) * Double(k) / Double(max(1, pauses))
            scenario.pauses.append(.init(node: others[k], at: at, duration: pauseSeconds))
        }
        for k in 0..<max(0, min(leaves, others.count - pauses)) {
            scenario.leaves.append(.init(node: others[pauses + k], at: eventsFrom + Double(k) * 2))
        }
        if let partition {
            let parts = partition.split(separator: ":").compactMap { Double($0) }
            guard parts.count == 2, parts[0] < parts[1] else { throw ValidationError("--partition wants START:END") }
            scenario.partitions = [SimScenario.halves(nodes: nodes, start: parts[0], end: parts[1], seed: seed)]
        }

        scenario.trace = traceDigest
        let report = Simulation.run(scenario)
        if traceDigest {
            printTraceDigest(report.traceDigest, report.traceRecords)
        } else if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            print(table(report, settings: settings))
        }
    }

    func table(_ r: SimReport, settings: SWIMSettings) -> String {
        func s(_ v: Double?) -> String { v.map { String(format: "%.2f s", $0) } ?? "-" }
        func n(_ v: Double) -> String { String(format: "%.1f", v) }
        let rows: [(String, String)] = [
            ("members", "\(r.nodes)  (seed \(r.seed), \(n(r.duration)) s virtual, loss \(n(r.loss * 100)) %)"),
            ("settings", "probe \(settings.probeInterval) s / timeout \(settings.probeTimeout) s, k \(settings.indirectChecks), α \(settings.suspicionAlpha), β \(settings.suspicionBeta)"),
            ("join seen by all (median / p90 / max)", "\(s(r.joinConvergence.median)) / \(s(r.joinConvergence.p90)) / \(s(r.joinConvergence.max))  over \(r.joinConvergence.count) joins"),
            ("crashes detected", "\(r.crashesDetected) of \(r.crashes)"),
            ("crash failed at all (median / max)", "\(s(r.detection.median)) / \(s(r.detection.max))"),
            ("crash failed at first (median / max)", "\(s(r.firstDetection.median)) / \(s(r.firstDetection.max))"),
            ("false positives (live marked failed)", "\(r.falsePositives)"),
            ("suspicions of live members", "\(r.falseSuspicions)"),
            ("failures across the partition", "\(r.partitionFailures)" + (r.partitionSplit.map { " (split after \(String(format: "%.2f", $0)) s)" } ?? "")),
            ("left reported left / failed", "\(r.leftReports) / \(r.leftReportedFailed)"),
            ("final views agree", r.viewsConverged ? "yes" : "no (\(r.viewMismatches) mismatches)"),
            ("datagrams per member per s", n(r.messagesPerMemberSecond)),
            ("bytes per member per s", "\(n(r.bytesPerMemberSecond)) (+ push-pull \(n(r.pushPullBytesPerMemberSecond)))"),
            ("largest datagram", "\(r.largestDatagram) B"),
            ("events / wall time", "\(r.events) / \(String(format: "%.2f", r.wallSeconds)) s"),
        ]
        return aligned(rows)
    }
}

HuddleSimCommand.main()
