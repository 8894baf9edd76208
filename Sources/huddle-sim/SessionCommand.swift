import ArgumentParser
import Foundation
import HuddleCore
import HuddleSim

/// `huddle-sim session`: N members each running the real `SessionCore` — membership, links,
/// causal broadcast, the journal and an attachment together — with datagram loss, crashes, a
/// partition and late joins; checks every delivery log and every survivor's copy of the attachment.
struct SessionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "session",
        abstract: "Simulate whole sessions on SessionCore: messaging and an attachment under loss, crashes, a partition and late joins.")

    @Option(help: "Number of members.") var nodes = 20
    @Option(help: "Random seed (same seed, same run; default 1, or the preset's).") var seed: UInt64?
    @Option(help: "Datagram loss probability (0...1); links are reliable.") var loss = 0.0
    @Option(help: "Reliable sends per member per second while sending.") var rate = 2.0
    @Option(help: "Seconds of sending.") var sendFor = 5.0
    @Option(help: "Replies each message draws on average while sending: every member that delivers it answers with probability REPLIES / (nodes - 1), and replies draw replies in turn, so at 1 or more the load grows without end (default: 0.5, at most 1 in 100 deliveries).")
    var replies: Double?
    @Option(help: "Quiet seconds after sending, for repair, detection and transfers.") var settleFor = 20.0
    @Option(help: "Members that crash, spread over the sending time.") var crashes = 0
    @Option(help: "Members that join late, spread over the sending time.") var lateJoins = 0
    @Option(help: "Members that leave for good (the leave op: hand-off, then left), spread over the sending time.") var leaves = 0
    @Option(help: "Cut off this many members (the highest indices not otherwise used) for --partition-seconds during sending.") var partitioned = 0
    @Option(help: "How long the partition lasts.") var partitionSeconds = 3.0
    @Option(help: "Attachment size in MiB added by member 0 when sending starts (0: none).") var attachmentMib = 0.0
    @Option(help: "Members behind NATs, as EASY,HARD (e.g. 30,30): the highest indices, easy then hard; the others public, and members join through public ones. NATted members link directly only by dialing out or punching (easy-easy), else through a relay (issue 36).")
    var nat: String?
    @Option(help: "With --nat: at this many seconds after sending starts, the member relaying the most links crashes (its relayed pairs must move).")
    var relayCrashAfter: Double?
    @Flag(help: "Run the session simulator's test and benchmark scenario instead (SessionScenario.hundredMembersUnderFaults: 100 members, 5 % loss, 3 crashes, 10 cut off for 10 s, a 20 MiB attachment); the other scenario options but --seed are ignored.")
    var hundredUnderFaults = false
    @Flag(help: "Print only a digest of the whole trace and its record count: equal seeds give equal digests in any process.")
    var traceDigest = false
    @Flag(help: "Print a line to standard error at each virtual second: sends, link messages and datagrams in that second, what the members hold back and store, repair requests so far, and the wall time.")
    var progress = false

    func validate() throws {
        guard nodes >= 2 else { throw ValidationError("--nodes wants at least 2 members") }
        if let nat { guard let (easy, hard) = Self.natCounts(nat), easy + hard < nodes else { throw ValidationError("--nat wants EASY,HARD (two counts) leaving at least one public member") } }
        if let replies { guard replies >= 0, replies < Double(nodes - 1) else { throw ValidationError("--replies wants a mean in 0..<nodes-1 (below 1 for a load that settles)") } }
        guard (0...1).contains(loss) else { throw ValidationError("--loss wants a probability in 0...1") }
        guard crashes >= 0, lateJoins >= 0, leaves >= 0, partitioned >= 0, crashes + lateJoins + leaves + partitioned < nodes else {
            throw ValidationError("--crashes, --late-joins, --leaves and --partitioned together must leave member 0 and at least one other")
        }
    }

    /// `--nat EASY,HARD`.
    static func natCounts(_ text: String) -> (easy: Int, hard: Int)? {
        let parts = text.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let easy = parts[0], let hard = parts[1], easy >= 0, hard >= 0 else { return nil }
        return (easy, hard)
    }

    static func scenario(nodes: Int, seed: UInt64, loss: Double, rate: Double, replies: Double? = nil, sendFor: Double, settleFor: Double, crashes: Int,
                         lateJoins: Int, leaves: Int = 0, partitioned: Int, partitionSeconds: Double, attachmentMib: Double) -> SessionScenario {
        var s = SessionScenario()
        s.members = nodes
        s.replyProbability = SessionScenario.replyProbability(replies: replies, members: nodes)
        s.seed = seed
        s.loss = loss
        s.rate = rate
        s.sendFor = sendFor
        s.settleFor = settleFor
        let start = s.startWindow + 1
        var rng = SWIMRandom(seed: seed ^ 0x5E55_1011)
        var pool = Array(1..<nodes)
        pool.shuffle(using: &rng)
        func spread(_ k: Int, of count: Int) -> Double { start + sendFor * Double(k + 1) / Double(count + 1) }
        s.crashes = (0..<crashes).map { (pool[$0], spread($0, of: crashes)) }
        s.lateJoins = (0..<lateJoins).map { (pool[crashes + $0], spread($0, of: lateJoins)) }
        s.leaves = (0..<leaves).map { (pool[crashes + lateJoins + $0], spread($0, of: leaves)) }
        if partitioned > 0 {
            let cut = Set(pool[(crashes + lateJoins + leaves)..<(crashes + lateJoins + leaves + partitioned)])
            s.partition = (cut, start + sendFor * 0.2, start + sendFor * 0.2 + partitionSeconds)
        }
        if attachmentMib > 0 { s.attachment = (0, start, Int(attachmentMib * 1_048_576)) }
        return s
    }

    func run() throws {
        var s = hundredUnderFaults ? SessionScenario.hundredMembersUnderFaults
            : Self.scenario(nodes: nodes, seed: seed ?? 1, loss: loss, rate: rate, replies: replies, sendFor: sendFor, settleFor: settleFor, crashes: crashes,
                            lateJoins: lateJoins, leaves: leaves, partitioned: partitioned, partitionSeconds: partitionSeconds, attachmentMib: attachmentMib)
        if let seed { s.seed = seed }
        if let nat, let (easy, hard) = Self.natCounts(nat) {
            s.natMix(easy: easy, hard: hard)
            if let after = relayCrashAfter { s.relayCrashAt = s.startWindow + 1 + after }
        }
        let (nodes, crashes, leaves, partitioned) = (s.members, s.crashes.count, s.leaves.count, s.partition?.groupA.count ?? 0)
        s.trace = traceDigest
        let clock = ContinuousClock()
        let began = clock.now
        let report = progress ? SessionSimulation.run(s, progress: { p in
            let line = String(format: "t=%.0f s  sends %d (+%d)  link msgs %d  datagrams %d  held %d  stored %d  repair requests %d  wall %.1f s\n",
                              p.seconds, p.sent, p.sentInSecond, p.linkMessages, p.datagrams, p.held, p.stored, p.repairRequests,
                              (clock.now - began) / .seconds(1))
            FileHandle.standardError.write(Data(line.utf8))
        }) : SessionSimulation.run(s)
        let wall = clock.now - began
        if traceDigest {
            printTraceDigest(report.traceDigest, report.traceRecords)
            return
        }
        let violations = report.violations
        let survivors = report.survivors.count
        let complete = report.attachmentComplete.filter { report.survivors.contains($0.key) }
        let intact = report.attachmentIntact.values.filter { $0 }.count
        let perSecond = Double(max(1, survivors)) * report.virtualSeconds
        var rows: [(String, String)] = [
            ("members", "\(nodes)  (seed \(s.seed), datagram loss \(s.loss * 100) %, \(crashes) crashes, \(s.lateJoins.count) late joins, \(leaves) leaves, \(partitioned) partitioned)"),
            ("reliable sends", "\(report.sent)"),
            ("delivery-log violations", violations.isEmpty ? "none" : "\(violations.count): \(violations.prefix(3).joined(separator: "; "))"),
            ("survivors seeing all survivors", "\(report.liveViews.values.filter { $0 == survivors }.count) of \(survivors)" + viewSizes(report, survivors)),
            ("left held back / stored, per survivor (max)", "\(report.held.max() ?? 0) / \(report.stored.max() ?? 0)"),
            ("datagrams, link messages per member per s", String(format: "%.1f, %.1f", Double(report.datagrams) / perSecond, Double(report.linkMessages) / perSecond)),
            ("repair requests", "\(report.repairRequests)"),
            ("forged", "\(report.forged)"),
        ]
        let detections = report.detection.values.compactMap { $0 }.sorted()
        if crashes > 0 {
            rows.append(("crashes seen failed by all survivors", "\(detections.count) of \(crashes)"
                + (SimReport.Spread(crashDelays(report, s)).median.map { String(format: ", median %.2f s after the crash", $0) } ?? "")))
        }
        if leaves > 0 {
            rows.append(("leaves: left events seen / chunks handed off", "\(report.leftSeen) / \(report.handedOff) of \(report.handedOffPushed) pushed"))
        }
        if partitioned > 0 {
            rows.append(("partition: failed across it / alive after", "\(report.failedAcrossPartition) / \(report.aliveAfterPartition) events"))
        }
        if s.attachment != nil {
            let times = complete.values.sorted()
            rows.append(("attachment complete / intact at survivors", "\(complete.count) / \(intact) of \(survivors)"
                + (times.last.map { String(format: ", last %.2f s after it was added", $0 - (s.attachment?.at ?? 0)) } ?? "")))
            rows.append(("chunk transfers (÷ chunks × receivers)", String(format: "%d (%.2f)", report.chunkTransfers,
                Double(report.chunkTransfers) / Double(max(1, ((s.attachment?.size ?? 0) + 262_143) / 262_144 * max(1, survivors - 1))))))
        }
        if !s.nat.isEmpty {
            rows.append(("paths at the end (pairs of survivors)", report.paths.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "; ")
                + (report.pathDisagreements > 0 ? "; \(report.pathDisagreements) pairs disagree" : "")))
            rows.append(("relayed links made / punched links / punches (succeeded of dialed)",
                         "\(report.relayedLinksMade) / \(report.punchedLinks) / \(report.punchSuccesses) of \(report.punchAttempts)"))
            if let relay = report.relayCrashed {
                rows.append(("relay crashed: its pairs linked again", "member \(relay): \(report.pairsRelinked) of \(report.pairsOnCrashedRelay.count)"))
            }
        }
        rows.append(("virtual / wall seconds", String(format: "%.0f / %.1f", report.virtualSeconds, wall / .seconds(1))))
        print(aligned(rows))
        let attachmentFailed = s.attachment != nil && (complete.count != survivors || intact != survivors)
        let unlinked = report.paths.values.reduce(0) { $0 + $1.none }
        let relinkFailed = report.relayCrashed != nil && report.pairsRelinked != report.pairsOnCrashedRelay.count
        if !violations.isEmpty || attachmentFailed || report.forged > 0 || unlinked > 0 || relinkFailed { throw ExitCode.failure }
    }


    /// The sizes of the views that are not whole, with how many survivors hold each, and which members.
    private func viewSizes(_ report: SessionReport, _ survivors: Int) -> String {
        let partial = report.liveViews.filter { $0.value != survivors }.sorted { $0.key < $1.key }
        guard !partial.isEmpty else { return "" }
        return "; not whole: " + partial.prefix(12).map { "member \($0.key) sees \($0.value)" }.joined(separator: ", ")
    }

    /// Seconds from each detected crash to the moment the last survivor saw it failed.
    private func crashDelays(_ report: SessionReport, _ s: SessionScenario) -> [Double] {
        s.crashes.compactMap { crash in report.detection[crash.member].flatMap { $0 }.map { $0 - crash.at } }
    }
}
