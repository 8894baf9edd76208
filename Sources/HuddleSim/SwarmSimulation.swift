import HuddleCore

/// What a swarm simulation does: one uploader, members fetching one attachment, faults.
public struct SwarmScenario: Sendable {
    public var members = 8
    public var chunks = 64
    public var seed: UInt64 = 1
    /// One-way latency of a request or a chunk.
    public var latency = 0.005
    /// Chunks a member can send per tick (its upload bandwidth).
    public var uploadPerTick = 2
    public var tick = 0.05
    /// The uploader crashes as soon as every chunk is held by at least two live members.
    public var crashUploaderWhenReplicated = false
    /// A member (index) whose chunks all fail their hash when it serves them.
    public var corruptServer: Int?
    /// A member that joins after the uploader crashed.
    public var lateJoiner = false
    public var limit = 120.0
    public init() {}
}

/// Outcome of a swarm simulation.
public struct SwarmReport: Sendable {
    /// Members (uploader excluded) that hold every chunk at the end, and how many there were.
    public var completed = 0
    public var fetchers = 0
    public var completeAt: Double?
    public var uploaderSent = 0
    public var uploaderCrashedAt: Double?
    /// Requests made to the corrupt server after it sent a bad copy of that chunk.
    public var repeatedBadAsks = 0
    /// Uploader chunks sent ÷ chunk count.
    public var uploaderRatio: Double { Double(uploaderSent) / Double(max(chunksTotal, 1)) }
    var chunksTotal = 0
}

/// Runs real `Swarm` schedulers for one attachment over a simulated network.
public struct SwarmSimulation {
    private enum Event {
        case tick
        case request(from: Int, to: Int, index: Int)
        case chunk(from: Int, to: Int, index: Int)
        case announce(from: Int, to: Int, have: Bitfield, offer: Bitfield)
    }

    private let s: SwarmScenario
    private var swarms: [Swarm]
    private var ids: [MemberID]
    private var live: [Bool]
    private var queue = SimEventQueue<Event>()
    private var uploadQueue: [[(to: Int, index: Int)]]
    private var announced: [[String]]
    private var now = 0.0
    private var report = SwarmReport()
    private var badFrom: Set<[Int]> = []

    public static func run(_ scenario: SwarmScenario) -> SwarmReport {
        var sim = SwarmSimulation(scenario)
        return sim.execute()
    }

    private init(_ s: SwarmScenario) {
        self.s = s
        let n = s.members + (s.lateJoiner ? 1 : 0)
        ids = (0..<n).map { MemberID(raw: UInt64($0 + 1)) }
        swarms = (0..<n).map { Swarm(local: MemberID(raw: UInt64($0 + 1)), seed: s.seed &+ UInt64($0)) }
        live = (0..<n).map { $0 < s.members }
        uploadQueue = Array(repeating: [], count: n)
        announced = Array(repeating: Array(repeating: "", count: n), count: n)
        report.chunksTotal = s.chunks
        report.fetchers = n - 1
        let members = Set((0..<s.members).map { ids[$0] })
        for i in 0..<s.members {
            swarms[i].setPeers(members)
            swarms[i].add(id: "a", chunkCount: s.chunks, uploader: ids[0], haveAll: i == 0, now: 0)
        }
    }

    private mutating func execute() -> SwarmReport {
        queue.schedule(.tick, at: 0)
        while let (time, event) = queue.pop(), time <= s.limit {
            now = time
            handle(event)
            let fetchers = (1..<ids.count).filter { live[$0] }
            if fetchers.allSatisfy({ swarms[$0].have("a")?.isFull == true }) && (!s.lateJoiner || live[ids.count - 1]) {
                report.completeAt = now
                break
            }
        }
        report.completed = (1..<ids.count).filter { live[$0] && swarms[$0].have("a")?.isFull == true }.count
        return report
    }

    private mutating func setLive() {
        let members = Set((0..<ids.count).filter { live[$0] }.map { ids[$0] })
        for i in 0..<ids.count where live[i] { swarms[i].setPeers(members) }
    }

    private mutating func handle(_ event: Event) {
        switch event {
        case .tick:
            tick()
            queue.schedule(.tick, at: now + s.tick)
        case let .request(from, to, index):
            guard live[to] else { return }
            if s.corruptServer == to && badFrom.contains([index, to, from]) { report.repeatedBadAsks += 1 }
            guard swarms[to].have("a")?[index] == true else { return }
            uploadQueue[to].append((from, index))
        case let .chunk(from, to, index):
            guard live[to] else { return }
            let valid = s.corruptServer != from
            if !valid { badFrom.insert([index, from, to]) }
            _ = swarms[to].chunkArrived(id: "a", index: index, from: ids[from], valid: valid)
        case let .announce(from, to, have, offer):
            guard live[to], live[from] else { return }
            swarms[to].peerAnnounced(ids[from], id: "a", have: have, offer: offer)
        }
    }

    private mutating func tick() {
        if s.crashUploaderWhenReplicated, live[0], let counts = swarms[1].holderCounts("a"),
           counts.allSatisfy({ $0 >= 2 }), swarms[0].holderCounts("a")?.allSatisfy({ $0 >= 2 }) == true {
            live[0] = false
            report.uploaderCrashedAt = now
            setLive()
            if s.lateJoiner {
                let j = ids.count - 1
                live[j] = true
                setLive()
                swarms[j].add(id: "a", chunkCount: s.chunks, uploader: ids[0], haveAll: false, now: now)
            }
        }
        for i in 0..<ids.count where live[i] {
            for request in swarms[i].tick(now: now) {
                guard let j = ids.firstIndex(of: request.peer) else { continue }
                queue.schedule(.request(from: i, to: j, index: request.index), at: now + s.latency)
            }
            for _ in 0..<min(s.uploadPerTick, uploadQueue[i].count) {
                let (to, index) = uploadQueue[i].removeFirst()
                swarms[i].served(id: "a", index: index, to: ids[to], now: now)
                if i == 0 { report.uploaderSent += 1 }
                queue.schedule(.chunk(from: i, to: to, index: index), at: now + s.latency)
            }
            guard let have = swarms[i].have("a") else { continue }
            for j in 0..<ids.count where j != i && live[j] {
                guard let offer = swarms[i].offer("a", to: ids[j], now: now) else { continue }
                let key = "\(have.bytes)|\(offer.bytes)"
                if announced[i][j] != key {
                    announced[i][j] = key
                    queue.schedule(.announce(from: i, to: j, have: have, offer: offer), at: now + s.latency)
                }
            }
        }
    }
}
