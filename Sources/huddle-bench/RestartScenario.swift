import Foundation
import HuddleControl

extension Scenarios {
    // MARK: restart (issue 37)

    /// kill -9 and restart on the same data directory, `rounds` times, at N = `n`: two members
    /// stream 256 B broadcasts throughout, and a subscriber on the victim reconnects after each
    /// restart with `since` = the last cursor it saw. Measures, per round, the time from the
    /// restart (the process started again) until every other member's `members` view shows the
    /// victim's member id `alive` at the incarnation the restarted node took; and at the end, the
    /// subscriber's message events against what the senders say they sent: each message seen twice
    /// is a duplicate, each never seen is missing. The victim is restarted once every other member
    /// has seen it failed (a crash, then a restart: the slow path back in).
    func restart(n: Int, rounds: Int) async throws -> [BenchRow] {
        let cluster = try HuddleCluster(binary: huddle, label: "rst\(n)")
        defer { cluster.stop() }
        try await cluster.start(n)
        let victim = n - 1
        let member = cluster.members[victim]
        let others = Array(0..<victim)
        let senders = [1, 2]
        let stream = StreamSenders(controls: senders.map { cluster.controls[$0] }, size: 256, every: .milliseconds(10))
        let subscriber = ResumingSubscriber()
        try await subscriber.connect(cluster.controls[victim], since: nil)
        stream.start()
        var backIn: [Double] = []
        var sameMember = 0, resumed = 0
        do {
            for _ in 0..<rounds {
                // Some of the stream reaches the subscriber before each kill.
                let before = await subscriber.count
                try await waitFor("the victim's subscriber to receive messages", seconds: 60) { await subscriber.count >= before + 50 }
                cluster.kill(victim)
                try await waitFor("the victim to exit", seconds: 30) { !cluster.processes[victim].isRunning }
                await subscriber.disconnect()
                try await waitFor("every other member to see the victim failed", seconds: 60) {
                    for i in others where try await memberRecord(cluster, at: i, member)?.state != "failed" { return false }
                    return true
                }
                let restarted = ContinuousClock.now
                let status = try await cluster.restart(victim)
                if status.member == member { sameMember += 1 }
                if status.resumed { resumed += 1 }
                // The incarnation the restarted member took (its own record in its own view).
                let own = try await memberRecord(cluster, at: victim, member)
                let incarnation = own?.incarnation ?? Int64.max
                try await subscriber.connect(cluster.controls[victim], since: await subscriber.lastCursor)
                try await waitFor("every other member to see the victim alive again", seconds: 120) {
                    for i in others {
                        let record = try await memberRecord(cluster, at: i, member)
                        guard record?.state == "alive", (record?.incarnation ?? -1) >= incarnation else { return false }
                    }
                    return true
                }
                backIn.append((ContinuousClock.now - restarted).seconds)
            }
        } catch {
            _ = try? await stream.stop()
            await subscriber.disconnect()
            throw error
        }
        let sent = try await stream.stop()
        let total = sent.reduce(0, +)
        // Everything sent reaches the subscriber (or the wait runs out: what is missing is counted).
        try? await waitFor("the subscriber to receive every message sent", seconds: 60) {
            await subscriber.distinct(senders: sent.count) >= total
        }
        try await Task.sleep(for: .milliseconds(500))  // room for a late duplicate to show
        let (duplicates, missing, delivered) = await subscriber.tally(sent: sent)
        await subscriber.disconnect()
        let met = (percentile(backIn, 0.5) <= 5 && (backIn.max() ?? .infinity) <= 5) && duplicates == 0 && missing == 0
        return [BenchRow(scenario: "restart N=\(n)",
                         measure: "kill -9 (seen failed by all), restart on the same --data-dir → alive (same member, new incarnation) in every other view, median / max s over \(rounds) rounds; subscriber on the victim resubscribing with its last cursor: message events duplicated / missing (2 members streaming 256 B)",
                         huddle: "\(fmt(percentile(backIn, 0.5))) / \(fmt(backIn.max() ?? .nan)) s (\(backIn.map { fmt($0) }.joined(separator: ", "))); same member \(sameMember) of \(rounds), resumed \(resumed) of \(rounds); duplicates \(duplicates) / missing \(missing) of \(total) sent (\(delivered) events); \(usageNote(cluster))",
                         comparison: "", ratio: "",
                         target: "target ≤ 5 s, 0 / 0: " + (met ? "met" : "missed"))]
    }

    /// `member`'s record in node `i`'s `members` view.
    private func memberRecord(_ cluster: HuddleCluster, at i: Int, _ member: String) async throws -> ControlMember? {
        try await cluster.request(cluster.controls[i], .members).members.first { $0.member == member }
    }

    // MARK: what durability costs

    /// The 256 B throughput row with `--data-dir` and without (a temporary directory, nothing
    /// persisted), alternating the two modes `rounds` times in this run (which goes first swaps
    /// each round); medians of each.
    func durabilityCost(rounds: Int) async throws -> [BenchRow] {
        var rates: [Bool: [Double]] = [true: [], false: []]
        // The same clusters' binary-frame pass (README, "Binary event frames"), after the lines.
        var framedRates: [Bool: [Double]] = [true: [], false: []]
        var framed = true
        var notes: [Bool: String] = [:]
        let count = quick ? 20000 : 100_000
        for r in 0..<rounds {
            for withData in r % 2 == 0 ? [true, false] : [false, true] {
                let cluster = try HuddleCluster(binary: huddle, label: withData ? "dd" : "tmp", dataDirectory: withData)
                defer { cluster.stop() }
                try await cluster.start(4)
                let worst = try await pipelinedRates(cluster, receivers: Array(cluster.controls.dropFirst()), size: 256, count: count).rates.min() ?? 0
                rates[withData, default: []].append(worst)
                let binary = try await pipelinedRates(cluster, receivers: Array(cluster.controls.dropFirst()), size: 256, count: count, binary: true)
                framedRates[withData, default: []].append(binary.rates.min() ?? 0)
                framed = framed && binary.binary
                var note = usageNote(cluster) + (try await repairNote(cluster))
                if withData {
                    let bytes = directoryBytes("\(cluster.dir)/d1")
                    note += "; a receiver's data directory \(fmt(Double(bytes) / 1e6, 1)) MB"
                }
                notes[withData] = note
            }
        }
        func runs(_ values: [Double]) -> String { values.map { "\(Int($0))" }.joined(separator: ", ") }
        let with = percentile(rates[true] ?? [], 0.5), without = percentile(rates[false] ?? [], 0.5)
        let framedWith = percentile(framedRates[true] ?? [], 0.5), framedWithout = percentile(framedRates[false] ?? [], 0.5)
        let measure = "msgs/s at each of 3 receivers (min of 3), median of \(rounds) runs alternating with the other mode"
        func binary(_ withData: Bool) -> String {
            let median = withData ? framedWith : framedWithout
            return framed ? "; binary frames \(Int(median)) (runs \(runs(framedRates[withData] ?? [])))" : "; binary frames: not offered by this node"
        }
        return [
            BenchRow(scenario: "throughput 256 B, --data-dir", measure: measure + "; JSON lines, then binary frames on the same cluster",
                     huddle: "JSON lines \(Int(with)) (runs \(runs(rates[true] ?? [])))\(binary(true)); last run: \(notes[true] ?? "")",
                     comparison: "temporary dir (no --data-dir): JSON lines \(Int(without)) (runs \(runs(rates[false] ?? [])))\(binary(false))",
                     ratio: "with ÷ without = \(fmt(with / without)) lines" + (framed ? ", \(fmt(framedWith / framedWithout)) binary" : ""), target: ""),
            BenchRow(scenario: "throughput 256 B, temporary dir", measure: measure + "; JSON lines, then binary frames on the same cluster",
                     huddle: "JSON lines \(Int(without)) (runs \(runs(rates[false] ?? [])))\(binary(false)); last run: \(notes[false] ?? "")",
                     comparison: "", ratio: "", target: ""),
        ]
    }
}

/// Bytes of the regular files under `path`.
func directoryBytes(_ path: String) -> Int {
    guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
    var total = 0
    for case let name as String in walker {
        total += ((try? FileManager.default.attributesOfItem(atPath: "\(path)/\(name)"))?[.size] as? Int) ?? 0
    }
    return total
}

/// Members that each send 256 B broadcasts at a steady pace (one request at a time, `every`
/// apart) until stopped; each message's text is "<sender index> <number> " padded to `size`.
/// `stop` says how many each sent (those whose `send` was answered ok).
// @unchecked Sendable, proven below: its one `var` (`tasks`) is touched only from the scenario's own task.
final class StreamSenders: @unchecked Sendable {
    // @unchecked: `tasks` is set by `start` and read by `stop`, both from the scenario's task.
    private let controls: [String]
    private let size: Int
    private let every: Duration
    private let stopped = DoneFlag()
    private var tasks: [Task<Int, any Error>] = []

    init(controls: [String], size: Int, every: Duration) {
        self.controls = controls
        self.size = size
        self.every = every
    }

    func start() {
        tasks = controls.enumerated().map { index, control in
            Task { [size, every, stopped] in
                let client = try await ControlClient.connect(path: control)
                var sent = 0
                while !stopped.isSet {
                    let head = "\(index) \(sent) "
                    _ = try await client.request(.send(.init(body: Array((head + String(repeating: "z", count: size - head.count)).utf8), to: nil, reliable: true)))
                    sent += 1
                    try await Task.sleep(for: every)
                }
                await client.close()
                return sent
            }
        }
    }

    /// Stops the senders; how many each sent.
    @discardableResult
    func stop() async throws -> [Int] {
        stopped.set()
        var counts: [Int] = []
        for task in tasks { counts.append(try await task.value) }
        return counts
    }
}

/// A subscriber to `messages` that is reconnected by hand (`connect(since:)`) after its node was
/// killed, and counts what it received by sender and number (`StreamSenders`' texts).
actor ResumingSubscriber {
    private var client: ControlClient?
    private var reader: Task<Void, Never>?
    /// How many times each (sender, number) was received.
    private var seen: [Int: [Int: Int]] = [:]
    private(set) var count = 0
    private(set) var lastCursor: Int64?
    private(set) var events = 0

    func connect(_ control: String, since: Int64?) async throws {
        let client = try await ControlClient.connect(path: control)
        let cursor = try await client.request(.subscribe(topics: [.messages], since: since)).cursor
        if lastCursor == nil { lastCursor = cursor }
        self.client = client
        reader = Task {
            do { for try await event in await client.events() { self.add(event) } } catch {}
        }
    }

    private func add(_ event: JSONObject) {
        if let cursor = event["cursor"]?.intValue { lastCursor = max(lastCursor ?? cursor, cursor) }
        guard event["event"]?.stringValue == "message", let text = event["text"]?.stringValue else { return }
        let parts = text.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let sender = Int(parts[0]), let number = Int(parts[1]) else { return }
        events += 1
        seen[sender, default: [:]][number, default: 0] += 1
        count += 1
    }

    func disconnect() async {
        reader?.cancel()
        await client?.close()
        client = nil
    }

    /// Distinct messages received from senders 0..<senders.
    func distinct(senders: Int) -> Int { (0..<senders).reduce(0) { $0 + (seen[$1]?.count ?? 0) } }

    /// Against `sent[i]` messages from sender i: receptions beyond the first, messages never
    /// received, and all message events received.
    func tally(sent: [Int]) -> (duplicates: Int, missing: Int, events: Int) {
        var duplicates = 0, missing = 0
        for (sender, total) in sent.enumerated() {
            let got = seen[sender] ?? [:]
            duplicates += got.values.reduce(0) { $0 + max(0, $1 - 1) }
            missing += (0..<total).filter { got[$0] == nil }.count
        }
        return (duplicates, missing, events)
    }
}
