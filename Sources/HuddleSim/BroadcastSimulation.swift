import HuddleCore
import HuddleCrypto

/// What a broadcast simulation does: members, a lossy reordering network, faults, and load.
public struct BroadcastScenario: Sendable {
    public var members = 10
    public var seed: UInt64 = 1
    public var loss = 0.0
    /// One-way delay: `delay` plus up to `jitter` more, drawn per message (so messages reorder).
    public var delay = 0.002
    public var jitter = 0.02
    /// Broadcasts per member per second while sending.
    public var rate = 20.0
    /// Probability that a member answers a message it delivers (a reply depends on it).
    public var replyProbability = 0.1
    public var sendFor = 5.0
    /// Quiet time after sending stops, for repair and acknowledgements to finish.
    public var settleFor = 15.0
    /// Members that crash (index, time); a crash is noticed by the others `detection` seconds later.
    public var crashes: [(member: Int, at: Double)] = []
    public var detection = 2.0
    /// Two groups that cannot reach each other during `partition`.
    public var partition: (groupA: Set<Int>, from: Double, until: Double)?
    /// Members that join late (they count in `members`): index and time.
    public var lateJoins: [(member: Int, at: Double)] = []
    public var digestInterval = 0.1
    /// Keep a `SimTrace` of every delivery, repair request, membership change and fault.
    public var trace = false
    public init() {}
}

/// The outcome: each member's delivery log for the checker, and what is left in buffers.
public struct BroadcastReport: Sendable {
    public var logs: [DeliveryLog]
    public var sent = 0
    public var datagrams = 0
    /// Per member that stayed: messages still held back, still stored for repair.
    public var held: [Int] = []
    public var stored: [Int] = []
    /// With `BroadcastScenario.trace`: the `SimTrace` digest of the run and its number of records.
    public var traceDigest: String?
    public var traceRecords: Int?
    public var violations: [String] { DeliveryChecker.violations(logs) }
}

/// Runs real `CausalBroadcast` instances over a simulated network with virtual time.
public struct BroadcastSimulation {
    private enum Event {
        case send(Int)
        case arrive(to: Int, from: Int, Packet)
        case digest(Int)
        case crash(Int)
        case noticeCrash(Int)
        case join(Int)
    }

    private enum Packet {
        case message(SignedMessage)
        case digest(CausalBroadcast.Digest)
        case request(origin: MemberID, from: UInt64, to: UInt64)
    }

    private let scenario: BroadcastScenario
    private var queue = SimEventQueue<Event>()
    private var rng: SWIMRandom
    private var cores: [CausalBroadcast]
    private let ids: [MemberID]
    private let identities: [Identity]
    private var live: [Bool]
    private var joined: [Bool]
    private var logs: [DeliveryLog]
    private var report: BroadcastReport
    private var now = 0.0
    private var trace: SimTrace?

    public static func run(_ scenario: BroadcastScenario) -> BroadcastReport {
        var sim = BroadcastSimulation(scenario)
        return sim.execute()
    }

    private init(_ s: BroadcastScenario) {
        scenario = s
        trace = s.trace ? SimTrace() : nil
        rng = SWIMRandom(seed: s.seed)
        ids = (0..<s.members).map { MemberID(raw: UInt64($0 + 1)) }
        identities = (0..<s.members).map { _ in Identity.generate() }
        let late = Set(s.lateJoins.map(\.member))
        joined = (0..<s.members).map { !late.contains($0) }
        live = joined
        crashed = Array(repeating: false, count: s.members)
        cores = (0..<s.members).map { CausalBroadcast(local: MemberID(raw: UInt64($0 + 1)), awaitingBaseline: late.contains($0)) }
        logs = (0..<s.members).map { DeliveryLog(member: "m\($0)", baseline: [:], deliveries: [], stayed: true) }
        report = BroadcastReport(logs: [])
        let members = Set((0..<s.members).filter { joined[$0] }.map { ids[$0] })
        for i in 0..<s.members where joined[i] {
            for j in 0..<s.members where joined[j] && j != i { _ = cores[i].linkHello(origin: ids[j], seq: 0) }
            _ = cores[i].setMembers(members, now: 0)
        }
    }

    private mutating func execute() -> BroadcastReport {
        for i in 0..<scenario.members {
            queue.schedule(.send(i), at: rng.uniform(0, 1 / scenario.rate))
            queue.schedule(.digest(i), at: rng.uniform(0, scenario.digestInterval))
        }
        for c in scenario.crashes { queue.schedule(.crash(c.member), at: c.at) }
        for j in scenario.lateJoins { queue.schedule(.join(j.member), at: j.at) }
        let end = scenario.sendFor + scenario.settleFor
        while let (time, event) = queue.pop(), time <= end {
            now = time
            handle(event)
        }
        for i in 0..<scenario.members where !live[i] { logs[i].stayed = false }
        for i in 0..<scenario.members where live[i] {
            logs[i].baseline = Dictionary(uniqueKeysWithValues: cores[i].baseline.map { ($0.key.description, $0.value) })
            report.held.append(cores[i].heldCount)
            report.stored.append(cores[i].unacknowledgedCount)
        }
        report.logs = logs
        report.traceDigest = trace?.digest
        report.traceRecords = trace?.records
        return report
    }

    private func reachable(_ a: Int, _ b: Int) -> Bool {
        guard let p = scenario.partition, now >= p.from, now < p.until else { return true }
        return p.groupA.contains(a) == p.groupA.contains(b)
    }

    private mutating func transmit(_ packet: Packet, from: Int, to: Int) {
        report.datagrams += 1
        guard rng.unit() >= scenario.loss, reachable(from, to) else { return }
        queue.schedule(.arrive(to: to, from: from, packet), at: now + scenario.delay + rng.uniform(0, scenario.jitter))
    }

    private mutating func broadcast(_ i: Int, body: [UInt8]) {
        let message = cores[i].makeBroadcast(body: body)
        let signed = MessageBatch.sign([message], identity: identities[i])[0]
        cores[i].stored(own: signed)
        record(i, signed.message)
        report.sent += 1
        for j in 0..<scenario.members where j != i && joined[j] { transmit(.message(signed), from: i, to: j) }
    }

    private mutating func record(_ i: Int, _ m: WireMessage) {
        trace?.record(.delivery, at: now, UInt64(i), m.origin.raw, m.seq, m.counter)
        logs[i].deliveries.append(DeliveryRecord(msg: m.id, from: m.origin.description, seq: m.seq == 0 ? nil : m.seq,
                                                 deps: Dictionary(uniqueKeysWithValues: m.deps.map { ($0.member.description, $0.seq) })))
    }

    private mutating func apply(_ i: Int, _ effects: [CausalBroadcast.Effect]) {
        var replies = 0
        defer {
            // An application answers after it has seen what was delivered, never in the middle of it.
            for _ in 0..<replies { broadcast(i, body: Array("re".utf8)) }
        }
        for effect in effects {
            switch effect {
            case let .deliver(signed):
                record(i, signed.message)
                if now < scenario.sendFor, rng.unit() < scenario.replyProbability { replies += 1 }
            case let .request(peer, origin, from, to):
                trace?.record(.repairRequest, at: now, UInt64(i), peer.raw, origin.raw, from, to)
                guard let j = ids.firstIndex(of: peer) else { continue }
                transmit(.request(origin: origin, from: from, to: to), from: i, to: j)
            case let .gap(origin, from, to, _):
                // Only messages are broadcast here: broadcast seqs are application seqs.
                logs[i].deliveries.append(.gap(from: origin.description, lost: from...to))
            }
        }
    }

    private mutating func handle(_ event: Event) {
        switch event {
        case let .send(i):
            guard live[i], joined[i], now < scenario.sendFor else { return }
            broadcast(i, body: Array("m".utf8))
            queue.schedule(.send(i), at: now + rng.uniform(0.5, 1.5) / scenario.rate)
        case let .digest(i):
            guard !crashed[i] else { return }
            if live[i] && joined[i] {
                let digest = cores[i].digest()
                for j in 0..<scenario.members where j != i && live[j] && joined[j] { transmit(.digest(digest), from: i, to: j) }
            }
            queue.schedule(.digest(i), at: now + scenario.digestInterval)
        case let .arrive(to, from, packet):
            guard live[to], joined[to] else { return }
            switch packet {
            case let .message(signed):
                guard MessageBatch.verify(signed, originNodeKey: identities[Int(signed.message.origin.raw) - 1].publicKey, cache: &verified) else { return }
                apply(to, cores[to].receive(signed))
            case let .digest(d):
                apply(to, cores[to].receiveDigest(d, from: ids[from], now: now))
            case let .request(origin, lo, hi):
                for signed in cores[to].stored(origin: origin, from: lo, to: hi) { transmit(.message(signed), from: to, to: from) }
            }
        case let .crash(i):
            trace?.record(.crash, at: now, UInt64(i))
            live[i] = false
            crashed[i] = true
            queue.schedule(.noticeCrash(i), at: now + scenario.detection)
        case .noticeCrash:
            let members = Set((0..<scenario.members).filter { live[$0] && joined[$0] }.map { ids[$0] })
            trace?.record(.membersSet, at: now, UInt64(members.count))
            for j in 0..<scenario.members where live[j] && joined[j] { apply(j, cores[j].setMembers(members, now: now)) }
        case let .join(i):
            let sponsors = (0..<scenario.members).filter { live[$0] && joined[$0] }
            guard !sponsors.isEmpty else { return }
            let sponsor = sponsors[rng.index(sponsors.count)]
            trace?.record(.join, at: now, UInt64(i), UInt64(sponsor))
            joined[i] = true
            live[i] = true
            let members = Set((0..<scenario.members).filter { live[$0] && joined[$0] }.map { ids[$0] })
            for j in sponsors { _ = cores[j].linkHello(origin: ids[i], seq: 0); apply(j, cores[j].setMembers(members, now: now)) }
            _ = cores[i].setMembers(members, now: now)
            apply(i, cores[i].adoptBaseline(cores[sponsor].delivered))
        }
    }

    private var verified = VerifiedRoots()
    private var crashed: [Bool] = []
}
