import ArgumentParser
import HuddleCore
import HuddleSim

/// `huddle-sim broadcast`: runs the real `CausalBroadcast` for N members on a lossy, reordering
/// network with crashes and late joins, and checks every delivery log (causal order, no gaps,
/// nothing twice, every stayer delivers every message).
struct BroadcastCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broadcast",
        abstract: "Simulate causal broadcast: loss, reordering, crashes, late joins; checks every delivery log.")

    @Option(help: "Number of members.") var nodes = 10
    @Option(help: "Random seed (same seed, same run).") var seed: UInt64 = 1
    @Option(help: "Loss probability of each message, digest and repair request (0...1).") var loss = 0.0
    @Option(help: "Broadcasts per member per second while sending.") var rate = 20.0
    @Option(help: "Seconds of sending, then of quiet for repair.") var sendFor = 5.0
    @Option(help: "Quiet seconds after sending, for repair and acknowledgements.") var settleFor = 15.0
    @Option(help: "Members that crash, spread over the sending time.") var crashes = 0
    @Option(help: "Members that join late, spread over the sending time.") var lateJoins = 0
    @Flag(help: "Print only a digest of the whole trace (every delivery, repair request, membership change and fault, with its virtual time) and its record count: equal seeds give equal digests in any process.")
    var traceDigest = false

    func validate() throws {
        guard nodes >= 2 else { throw ValidationError("--nodes wants at least 2 members") }
        guard (0...1).contains(loss) else { throw ValidationError("--loss wants a probability in 0...1") }
        guard crashes >= 0, lateJoins >= 0, crashes + lateJoins < nodes else {
            throw ValidationError("--crashes plus --late-joins must leave at least one member that stays from the start")
        }
    }

    func run() throws {
        var scenario = BroadcastScenario()
        scenario.members = nodes
        scenario.seed = seed
        scenario.loss = loss
        scenario.rate = rate
        scenario.sendFor = sendFor
        scenario.settleFor = settleFor
        scenario.trace = traceDigest
        // Distinct members for the faults (never member 0), in a seeded order.
        var rng = SWIMRandom(seed: seed ^ 0xB40A_DCA5)
        var pool = Array(1..<nodes)
        pool.shuffle(using: &rng)
        func spread(_ k: Int, of count: Int) -> Double { sendFor * Double(k + 1) / Double(count + 1) }
        scenario.crashes = (0..<crashes).map { (pool[$0], spread($0, of: crashes)) }
        scenario.lateJoins = (0..<lateJoins).map { (pool[crashes + $0], spread($0, of: lateJoins)) }

        let report = BroadcastSimulation.run(scenario)
        if traceDigest {
            printTraceDigest(report.traceDigest, report.traceRecords)
            return
        }
        let violations = report.violations
        let rows: [(String, String)] = [
            ("members", "\(nodes)  (seed \(seed), loss \(loss * 100) %, \(crashes) crashes, \(lateJoins) late joins)"),
            ("broadcasts sent", "\(report.sent)"),
            ("packets sent", "\(report.datagrams)"),
            ("delivery-log violations", violations.isEmpty ? "none" : "\(violations.count): \(violations.prefix(3).joined(separator: "; "))"),
            ("left held back / stored, per stayer (max)", "\(report.held.max() ?? 0) / \(report.stored.max() ?? 0)"),
        ]
        print(aligned(rows))
        if !violations.isEmpty { throw ExitCode.failure }
    }
}
