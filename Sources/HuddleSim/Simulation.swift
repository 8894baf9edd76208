import HuddleCore

/// A deterministic discrete-event simulation of N `SWIMInstance`s on a lossy network.
///
/// Guarantees: virtual time only (no sleeping), one seeded generator for the network and the
/// scenario, instances seeded from it, and events at equal times handled in scheduling order — so
/// the same `SimScenario` always produces the same report (apart from `wallSeconds`) — in any
/// process: nothing depends on `Set`/`Dictionary` order or the hash seed (`SimTrace` checks it). Every
/// datagram is encoded to bytes and decoded on delivery, so the codec is exercised. Per event the
/// cost is that of the instance call plus O(log events); nothing scans all nodes per tick.
public struct Simulation: Sendable {
    public let scenario: SimScenario
    var nodes: [SimNode] = []
    var ids: [MemberID] = []
    var addrs: [String] = []
    var indexByAddr: [String: Int] = [:]
    var indexByID: [MemberID: Int] = [:]
    var nodeKeys: [[UInt8]] = []
    var queue = SimEventQueue<SimEvent>()
    var rng: SWIMRandom
    var now = 0.0
    var metrics: SimMetrics
    /// Every delivery, membership change and fault, when the scenario asks for a trace.
    var trace: SimTrace?

    public init(_ scenario: SimScenario) {
        var scenario = scenario
        // The member table's bound guards a node against fake members; a simulated session of
        // thousands is that many real ones.
        scenario.settings.memberLimit = max(scenario.settings.memberLimit, 2 * scenario.nodes)
        self.scenario = scenario
        rng = SWIMRandom(seed: scenario.seed)
        metrics = SimMetrics(nodes: scenario.nodes)
        trace = scenario.trace ? SimTrace() : nil
        var seen: Set<UInt64> = []
        for i in 0..<scenario.nodes {
            var raw = rng.next()
            while seen.contains(raw) { raw = rng.next() }
            seen.insert(raw)
            let id = MemberID(raw: raw)
            let key = (0..<32).map { UInt8(truncatingIfNeeded: raw >> UInt64(($0 % 8) * 8)) ^ UInt8($0) }
            let info = MemberInfo(id: id, node: key, name: "node-\(i)", addr: SimAddress.of(i, port: 7946))
            ids.append(id); addrs.append(info.addr); nodeKeys.append(key)
            indexByAddr[info.addr] = i; indexByID[id] = i
            nodes.append(SimNode(instance: SWIMInstance(local: info, settings: scenario.settings, seed: rng.next(), signer: UncheckedMembershipSigner())))
        }
        let early = scenario.prejoined ? max(0, scenario.nodes - scenario.lateJoins.count) : 0
        if early > 0 {
            let known = (0..<early).map { nodes[$0].instance.local }
            for i in 0..<early {
                let me = nodes[i].instance.local
                nodes[i].instance = SWIMInstance(local: me, settings: scenario.settings, seed: rng.next(), signer: UncheckedMembershipSigner(), members: known)
                nodes[i].status = .running
                nodes[i].joinedAt = 0
                metrics.joinTimes[i] = 0
                queue.schedule(.tick(i), at: 0)
                nodes[i].scheduledTick = 0
            }
            for (k, at) in scenario.lateJoins.enumerated() where early + k < scenario.nodes {
                queue.schedule(.start(early + k), at: at)
            }
        }
        for i in 0..<scenario.nodes where early == 0 {
            let at = scenario.joinTimes.flatMap { $0.indices.contains(i) ? $0[i] : nil }
                ?? (i == 0 ? 0 : rng.uniform(0, scenario.joinWindow))
            queue.schedule(.start(i), at: at)
        }
        for c in scenario.crashes where nodes.indices.contains(c.node) { queue.schedule(.crash(c.node), at: c.at) }
        for p in scenario.pauses where nodes.indices.contains(p.node) { queue.schedule(.pause(p.node, until: p.at + p.duration), at: p.at) }
        for l in scenario.leaves where nodes.indices.contains(l.node) { queue.schedule(.leave(l.node), at: l.at) }
    }

    /// Runs the scenario to its end and returns the figures.
    public static func run(_ scenario: SimScenario) -> SimReport {
        var sim = Simulation(scenario)
        let clock = ContinuousClock()
        let start = clock.now
        sim.runUntil(scenario.duration)
        return sim.report(wallSeconds: (clock.now - start) / .seconds(1))
    }

    /// Processes every event up to virtual time `end`.
    public mutating func runUntil(_ end: Double) {
        while let t = queue.nextTime, t <= end, let (time, event) = queue.pop() {
            now = time
            metrics.events += 1
            handle(event)
        }
        now = end
    }

    /// The view of node `i` (for tests).
    public func view(of i: Int) -> [MemberID: MemberInfo] { nodes[i].instance.members }
    public func memberID(of i: Int) -> MemberID { ids[i] }
    public func isLive(_ i: Int) -> Bool { nodes[i].isLive }

    // MARK: - Events

    mutating func handle(_ event: SimEvent) {
        switch event {
        case let .start(i):
            guard nodes[i].status == .pending else { return }
            trace?.record(.start, at: now, UInt64(i))
            nodes[i].status = .running
            nodes[i].joinedAt = now
            metrics.joinTimes[i] = now
            var seeds: [String] = []
            for _ in 0..<64 {
                let j = rng.index(nodes.count)
                if j != i, nodes[j].status == .running { seeds = [addrs[j]]; break }
            }
            if seeds.isEmpty, let j = nodes.indices.first(where: { $0 != i && nodes[$0].status == .running }) { seeds = [addrs[j]] }
            perform(i, nodes[i].instance.join(seeds: seeds, now: now))
        case let .tick(i):
            guard nodes[i].scheduledTick == now else { return }
            nodes[i].scheduledTick = .infinity
            guard nodes[i].status == .running || nodes[i].status == .left else { return }
            perform(i, nodes[i].instance.tick(now: now))
        case let .deliver(to, _, _), let .pushPullRequest(to, _, _), let .pushPullReply(to, _, _):
            switch nodes[to].status {
            case .running: input(to, event)
            case .paused: nodes[to].backlog.append(event)
            case .pending, .crashed, .left: break
            }
        case let .crash(i):
            guard nodes[i].isLive else { return }
            trace?.record(.crash, at: now, UInt64(i))
            nodes[i].status = .crashed
            nodes[i].crashedAt = now
            nodes[i].backlog = []
            metrics.crashTimes[i] = now
        case let .pause(i, until):
            guard nodes[i].status == .running else { return }
            trace?.record(.pause, at: now, UInt64(i))
            nodes[i].status = .paused
            queue.schedule(.resume(i), at: until)
        case let .resume(i):
            guard nodes[i].status == .paused else { return }
            trace?.record(.resume, at: now, UInt64(i))
            nodes[i].status = .running
            let backlog = nodes[i].backlog
            nodes[i].backlog = []
            for e in backlog { input(i, e) }
            perform(i, nodes[i].instance.tick(now: now))
        case let .leave(i):
            guard nodes[i].status == .running else { return }
            trace?.record(.leave, at: now, UInt64(i))
            metrics.leaveTimes[i] = now
            perform(i, nodes[i].instance.leave(now: now))
            nodes[i].status = .left
            nodes[i].leftAt = now
        }
    }

    /// Hands an arrived input to a running node.
    mutating func input(_ i: Int, _ event: SimEvent) {
        switch event {
        case let .deliver(_, from, bytes):
            trace?.record(.datagram, at: now, UInt64(i), UInt64(from), bytes: bytes)
            guard let message = try? SWIMMessage.decode(bytes) else { metrics.decodeFailures += 1; return }
            perform(i, nodes[i].instance.receive(interned(message), from: addrs[from], now: now))
        case let .pushPullRequest(_, from, bytes):
            trace?.record(.pushPullRequest, at: now, UInt64(i), UInt64(from), bytes: bytes)
            guard let state = try? SWIMPushPull.decode(bytes) else { metrics.decodeFailures += 1; return }
            perform(i, nodes[i].instance.receivePushPull(interned(state.members), join: state.join, from: addrs[from], now: now))
            // The answer is our state after merging theirs.
            let reply = SWIMPushPull(join: state.join, members: nodes[i].instance.pushPullState()).encode()
            metrics.countPushPull(bytes: reply.count, at: now, from: scenario.measureFrom)
            queue.schedule(.pushPullReply(to: from, from: i, bytes: reply), at: now + linkDelay())
        case let .pushPullReply(_, from, bytes):
            trace?.record(.pushPullReply, at: now, UInt64(i), UInt64(from), bytes: bytes)
            guard let state = try? SWIMPushPull.decode(bytes) else { metrics.decodeFailures += 1; return }
            perform(i, nodes[i].instance.receivePushPull(interned(state.members), join: state.join, from: addrs[from], now: now))
        default:
            break
        }
    }

    /// Executes a node's effects: datagrams through the lossy network, push-pulls over reliable
    /// links, events into the metrics; then schedules the node's next tick.
    mutating func perform(_ i: Int, _ effects: [SWIMEffect]) {
        for effect in effects {
            switch effect {
            case let .send(message, addr):
                let bytes = message.encode()
                metrics.countDatagram(bytes: bytes.count, at: now, from: scenario.measureFrom)
                guard let to = indexByAddr[addr], reachable(i, to), rng.unit() >= scenario.loss else { continue }
                queue.schedule(.deliver(to: to, from: i, bytes: bytes), at: now + linkDelay())
            case let .pushPull(addr, _, join):
                guard let to = indexByAddr[addr], reachable(i, to), nodes[to].status != .pending else { continue }
                let bytes = SWIMPushPull(join: join, members: nodes[i].instance.pushPullState()).encode()
                metrics.countPushPull(bytes: bytes.count, at: now, from: scenario.measureFrom)
                queue.schedule(.pushPullRequest(to: to, from: i, bytes: bytes), at: now + linkDelay())
            case .refused: break
            case let .emit(change, info):
                trace?.record(.memberChange, at: now, UInt64(i), info.id.raw, info.incarnation, bytes: Array(change.rawValue.utf8))
                guard let target = indexByID[info.id] else { continue }
                metrics.record(change, observer: i, target: target, at: now,
                               targetLive: nodes[target].isLive, acrossPartition: partitioned(i, target, slack: true))
            }
        }
        scheduleTick(i)
    }

    mutating func scheduleTick(_ i: Int) {
        guard nodes[i].status == .running || nodes[i].status == .left else { return }
        let next = max(nodes[i].instance.nextDeadline, now + 0.0005)
        guard next.isFinite, next < nodes[i].scheduledTick else { return }
        nodes[i].scheduledTick = next
        queue.schedule(.tick(i), at: next)
    }

    // MARK: - Network

    mutating func linkDelay() -> Double { scenario.delay + rng.uniform(0, scenario.jitter) }

    /// False when a partition separates the two nodes now.
    func reachable(_ a: Int, _ b: Int) -> Bool { !partitioned(a, b, slack: false) }

    /// With `slack`, partitions count for a suspicion timeout after they end (failures decided then
    /// are consequences of the partition, not false positives).
    func partitioned(_ a: Int, _ b: Int, slack: Bool) -> Bool {
        let grace = slack ? 2 * SWIMSuspicion.bounds(members: nodes.count, settings: scenario.settings).max + 5 : 0
        for p in scenario.partitions where now >= p.start && now < p.end + grace {
            if p.side.contains(a) != p.side.contains(b) { return true }
        }
        return false
    }

    /// Shares the node-key storage of decoded records with the canonical ones, so N full views do not
    /// hold N² copies of the same 32 bytes (the simulator's memory, not the protocol's behaviour).
    func interned(_ message: SWIMMessage) -> SWIMMessage {
        var m = message
        for j in m.gossip.indices {
            if case var .alive(info) = m.gossip[j] { info = interned(info); m.gossip[j] = .alive(info) }
        }
        return m
    }

    func interned(_ infos: [MemberInfo]) -> [MemberInfo] { infos.map(interned) }

    func interned(_ info: MemberInfo) -> MemberInfo {
        guard let k = indexByID[info.id], nodeKeys[k] == info.node else { return info }
        var copy = info
        copy.node = nodeKeys[k]
        return copy
    }
}
