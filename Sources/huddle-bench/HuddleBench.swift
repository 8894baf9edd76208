import ArgumentParser
import Foundation

/// `huddle-bench`: every performance figure Huddle claims, measured against real processes, side by
/// side with the peer a user would compare it with, in the same run.
@main
struct HuddleBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "huddle-bench",
        abstract: "Benchmarks real huddle processes on this machine against Serf, raw TCP and the simulator.",
        discussion: "Rows print as each scenario ends. Set HUDDLE_BENCH_KEEP=1 to keep every cluster's directory (node logs n*.log) for diagnosis.")

    @Flag(help: "Short runs (under 3 minutes): what CI may run as a smoke test.") var quick = false
    @Option(help: "Comma-separated scenarios: latency, throughput (with the slow-subscriber row), membership, stability, attachment, transfer-latency, crypto, attack, removal, restart (kill -9 and restart on the same --data-dir, N=8), durability (the 256 B throughput row with and without --data-dir, alternating), scale (session: the session simulator's rows of scale alone — N = 100 under faults, and N = 100 with 60 NATted; slow-subscriber alone), reach (members behind NAT routers in network namespaces: direct vs relayed, the relay's cost, the 5-host lab; needs root).")
    var scenarios = "latency,throughput,durability,membership,restart,stability,attachment,transfer-latency,crypto,attack,removal,scale,reach"
    @Option(help: "Write the results as Markdown to this file (e.g. BENCHMARKS.md).") var out: String?
    @Option(help: "The huddle binary to run (default: the one next to this executable).") var huddle: String?
    @Option(help: "Sample the machine with `perf record` during each scenario, keep the raw data in this directory, and add where the node processes spent their CPU to the output.")
    var profile: String?

    func run() async throws {
        let binary = huddle ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("huddle").path
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw ValidationError("no huddle binary at \(binary) (build it, or pass --huddle)") }
        BenchSetup.installPeersIfMissing()
        if !SerfCluster.available { print("huddle-bench: serf is not installed (apt-get install serf): Serf comparisons are skipped") }
        if !BenchSetup.libtorrentAvailable { print("huddle-bench: python3-libtorrent is not installed (apt-get install python3-libtorrent): libtorrent comparisons are skipped") }
        let s = Scenarios(huddle: binary, quick: quick)
        let wanted = Set(scenarios.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        var rows: [BenchRow] = []
        var profiles: [String] = []
        if let profile {
            guard ScenarioProfile.available else { throw ValidationError("--profile needs /usr/bin/perf and /usr/bin/python3 (apt-get install linux-perf python3)") }
            try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
        }
        func record(_ name: String, _ measure: () async throws -> [BenchRow]) async {
            var new: [BenchRow]
            _ = ClusterMemory.take()
            let sampling = profile.map { ScenarioProfile(name: name, dir: $0) }
            do { new = try await measure() } catch {
                new = [BenchRow(scenario: name, measure: "", huddle: "failed: \(error)", comparison: "", ratio: "", target: "")]
            }
            if let sampling {
                let summary = sampling.stop()
                FileHandle.standardOutput.write(Data(summary.utf8))
                profiles.append(summary)
            }
            let memory = ClusterMemory.take() ?? "n/a (no node processes)"
            for i in new.indices where new[i].memory.isEmpty { new[i].memory = memory }
            // Written at once (not through print's buffer), so rows appear as they are measured even
            // when the output goes to a file.
            for r in new {
                FileHandle.standardOutput.write(Data("\(r.scenario) | \(r.measure) | \(r.huddle) | \(r.comparison) | \(r.ratio) | \(r.target) | \(r.memory)\n".utf8))
            }
            rows += new
        }
        if wanted.contains("latency") { for n in quick ? [4] : [4, 8] { await record("latency N=\(n)") { try await s.latency(n: n) } } }
        if wanted.contains("throughput") { for size in [256, 16384] { await record("throughput \(size) B") { try await s.throughput(size: size) } } }
        if wanted.contains("durability") { await record("durability") { try await s.durabilityCost(rounds: quick ? 1 : 3) } }
        if wanted.contains("throughput") || wanted.contains("slow-subscriber") {
            await record("slow subscriber") { try await s.slowSubscriber() }
        }
        if wanted.contains("membership") { for n in quick ? [8] : [8, 24] { await record("membership N=\(n)") { try await s.membership(n: n) } } }
        if wanted.contains("restart") { await record("restart N=8") { try await s.restart(n: 8, rounds: quick ? 2 : 5) } }
        if wanted.contains("stability") {
            await record("false positives") { try await s.falsePositivesUnderLoad(n: 8, seconds: quick ? 20 : 300) }
        }
        if wanted.contains("crypto") { await record("crypto") { s.cryptoLimit() } }
        if wanted.contains("attachment") {
            for n in quick ? [4] : [4, 8] { await record("attachment N=\(n)") { try await s.attachment(n: n, mib: quick ? 16 : 100) } }
        }
        if wanted.contains("transfer-latency") {
            await record("latency during transfer") { try await s.latencyDuringTransfer(mib: quick ? 16 : 100) }
        }
        if wanted.contains("attack") { await record("under attack") { try await s.underAttack() } }
        if wanted.contains("removal") { for n in quick ? [8] : [8, 24] { await record("removal N=\(n)") { try await s.removal(n: n) } } }
        if wanted.contains("scale") { await record("scale") { s.scale() } }
        if wanted.contains("reach") { await record("reach") { try await s.reach() } }
        // The session simulator's row alone (`scale` includes it).
        if wanted.contains("session") && !wanted.contains("scale") { await record("session") { [s.sessionScale(), s.sessionReachScale()] } }
        if let out { try markdown(rows, profiles: profiles).write(toFile: out, atomically: true, encoding: .utf8) }
    }

    private func markdown(_ rows: [BenchRow], profiles: [String]) -> String {
        var uts = utsname()
        uname(&uts)
        let kernel = withUnsafeBytes(of: &uts.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let commit = (try? String(contentsOfFile: ".git/HEAD", encoding: .utf8)).flatMap { head -> String? in
            let ref = head.trimmingCharacters(in: .whitespacesAndNewlines)
            guard ref.hasPrefix("ref: ") else { return String(ref.prefix(10)) }
            return (try? String(contentsOfFile: ".git/" + ref.dropFirst(5), encoding: .utf8)).map { String($0.prefix(10)) }
        } ?? "unknown"
        let memory = Double(sysconf(Int32(_SC_PHYS_PAGES)) * sysconf(Int32(_SC_PAGESIZE))) / Double(1 << 30)
        var md = """
            # Huddle benchmarks

            Every number in the table was printed by `huddle-bench` in one run, and every profile by `huddle-bench --profile` (this run, or a second one that its heading names); nothing in them is edited by hand. A section that is analysis written by hand says so.

            - machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(fmt(memory, 0)) GiB, Linux \(kernel)
            - date: \(Date().formatted(.iso8601))
            - commit: \(commit)
            - command: `swift run -c release huddle-bench\(quick ? " --quick" : "")\(profile == nil ? "" : " --profile DIR") --out BENCHMARKS.md`
            - peers: Serf \(SerfCluster.available ? "0.8 (Debian package `serf`, LAN profile, encrypted)" : "not installed"); raw loopback TCP written in the benchmark; libtorrent via `scripts/libtorrent_bench.py` (Debian `python3-libtorrent`, one seeder, 256 KiB pieces, loopback TCP)

            | scenario | measure | Huddle | comparison (same run) | ratio | target | peak RSS per node |
            |---|---|---|---|---|---|---|

            """
        for r in rows { md += "| \(r.scenario) | \(r.measure) | \(r.huddle) | \(r.comparison) | \(r.ratio) | \(r.target) | \(r.memory) |\n" }
        if !profiles.isEmpty {
            md += "\n## Where the node processes spent their CPU (`--profile`, same run)\n\n" + profiles.joined()
        }
        return md
    }
}
