import HuddleCore
import HuddleCrypto

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

/// Runs real journal cores (`Journal`, and the `Swarm` inside it) for one attachment over a
/// simulated network: requests, `have`s and state changes are the ones the node would send.
public struct SwarmSimulation {
    private enum Event {
        case tick
        case request(from: Int, to: Int, index: Int)
        case chunk(from: Int, to: Int, index: Int)
        case have(from: Int, to: Int, have: Bitfield, offer: Bitfield)
    }

    private let s: SwarmScenario
    private var journals: [Journal]
    private var ids: [MemberID]
    private let entry: JournalEntry
    private let id: String
    private var live: [Bool]
    private var queue = SimEventQueue<Event>()
    private var uploadQueue: [[(to: Int, index: Int)]]
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
        journals = (0..<n).map { Journal(local: MemberID(raw: UInt64($0 + 1)), seed: s.seed &+ UInt64($0)) }
        live = (0..<n).map { $0 < s.members }
        uploadQueue = Array(repeating: [], count: n)
        report.chunksTotal = s.chunks
        report.fetchers = n - 1
        // The uploader's manifest: chunk hashes stand in for content (bodies are simulated by index).
        let uploader = Identity.generate()
        var manifest = Manifest(name: "sim", size: UInt64(s.chunks) * UInt64(Manifest.defaultChunkSize), chunkSize: UInt32(Manifest.defaultChunkSize),
                                chunkHashes: (0..<s.chunks).map { index in (0..<32).map { UInt8(truncatingIfNeeded: index >> ($0 % 4 * 8)) } },
                                meta: [], uploader: ids[0], uploaderNodeKey: uploader.publicKey, signature: [])
        let key = [UInt8](repeating: 1, count: 32)
        manifest.sign(with: uploader, key: key)
        entry = .add(manifest, key: key)
        id = manifest.id
        let members = Set((0..<s.members).map { ids[$0] })
        for i in 0..<s.members {
            journals[i].setPeers(members)
            _ = journals[i].apply(entry, now: 0)
        }
    }

    private func holdsAll(_ i: Int) -> Bool { journals[i].swarm.have(id)?.isFull == true }

    private mutating func execute() -> SwarmReport {
        queue.schedule(.tick, at: 0)
        while let (time, event) = queue.pop(), time <= s.limit {
            now = time
            handle(event)
            let fetchers = (1..<ids.count).filter { live[$0] }
            if fetchers.allSatisfy(holdsAll) && (!s.lateJoiner || live[ids.count - 1]) {
                report.completeAt = now
                break
            }
        }
        report.completed = (1..<ids.count).filter { live[$0] && holdsAll($0) }.count
        return report
    }

    private mutating func setLive() {
        let members = Set((0..<ids.count).filter { live[$0] }.map { ids[$0] })
        for i in 0..<ids.count where live[i] { journals[i].setPeers(members) }
    }

    private mutating func handle(_ event: Event) {
        switch event {
        case .tick:
            tick()
            queue.schedule(.tick, at: now + s.tick)
        case let .request(from, to, index):
            guard live[to] else { return }
            if s.corruptServer == to && badFrom.contains([index, to, from]) { report.repeatedBadAsks += 1 }
            guard journals[to].holds(id, index) else { return }
            uploadQueue[to].append((from, index))
        case let .chunk(from, to, index):
            guard live[to] else { return }
            let valid = s.corruptServer != from
            if !valid { badFrom.insert([index, from, to]) }
            if journals[to].chunkArrived(id, index, from: ids[from], valid: valid) { _ = journals[to].stored(id, now: now) }
        case let .have(from, to, have, offer):
            guard live[to], live[from] else { return }
            journals[to].receiveHave(ids[from], id: id, have: have, offer: offer, now: now)
        }
    }

    private mutating func tick() {
        if s.crashUploaderWhenReplicated, live[0], journals[1].state(of: id, now: now) == .replicated,
           journals[0].state(of: id, now: now) == .replicated {
            live[0] = false
            report.uploaderCrashedAt = now
            setLive()
            if s.lateJoiner {
                let j = ids.count - 1
                live[j] = true
                setLive()
                _ = journals[j].apply(entry, now: now)
            }
        }
        for i in 0..<ids.count where live[i] {
            let linked = (0..<ids.count).filter { $0 != i && live[$0] }.map { ids[$0] }
            for effect in journals[i].tick(now: now, linked: linked) {
                switch effect {
                case let .requestChunk(peer, _, index):
                    guard let j = ids.firstIndex(of: peer) else { continue }
                    queue.schedule(.request(from: i, to: j, index: index), at: now + s.latency)
                case let .sendHave(peer, _, have, offer):
                    guard let j = ids.firstIndex(of: peer) else { continue }
                    queue.schedule(.have(from: i, to: j, have: have, offer: offer), at: now + s.latency)
                case .emit, .deleteStored, .changed, .storeFull, .refused:
                    break
                }
            }
            for _ in 0..<min(s.uploadPerTick, uploadQueue[i].count) {
                let (to, index) = uploadQueue[i].removeFirst()
                journals[i].served(id, index, to: ids[to], now: now)
                if i == 0 { report.uploaderSent += 1 }
                queue.schedule(.chunk(from: i, to: to, index: index), at: now + s.latency)
            }
        }
    }
}
