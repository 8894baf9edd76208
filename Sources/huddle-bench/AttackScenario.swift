import Foundation
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import Synchronization

/// What the flooding attacker did.
struct AttackTally: Sendable {
    var links = 0
    var linkMessages = 0
    var bytes = 0
}

/// What a hostile member does to the node it attacks (issue 33's confirmed attacks).
enum AttackKind: String, CaseIterable, Sendable {
    /// Chunk requests it never reads the answers to, oversized message bodies, and gossip of
    /// unsigned members and forged claims.
    case flood
    /// Digests showing no activity value, never reading: each once queued the whole activity
    /// record (up to 64 KiB) to it (46 MB to 811 MB in 24 s).
    case digests
    /// One-byte broadcasts of its own above a gap it never fills: 50,000 filled the hold-back and
    /// every send answered `busy`.
    case heldFlood = "held flood"
    /// Signed claims that another (honest) member failed, each at the incarnation the node last
    /// told of it, 20 a second, while the attacker keeps itself live: each claim once failed the
    /// member and closed its links (24 flaps in 40 s at each node).
    case claims
}

/// A member that holds the session key and attacks one node over its links as fast as the node
/// takes the bytes (`AttackKind`). It runs on a thread of its own (blocking socket writes) until
/// `stop`; when the node closes its link it links again as a new member.
final class FloodingAttacker: Sendable {
    private let stopped = DoneFlag()
    private let finished = DispatchSemaphore(value: 0)
    private let tally = Mutex(AttackTally())

    /// Attacks `addr` (`flood` asks for the chunks `0..<chunks` of attachment `attachment`;
    /// `claims` claims that `target` failed).
    init(_ kind: AttackKind, addr: String, keyFile: String, attachment: String, chunks: Int, target: MemberID) {
        Thread.detachNewThread { [self] in
            defer { finished.signal() }
            guard let key = try? SessionKey.load(from: keyFile) else { return }
            while !stopped.isSet {
                do { try attack(kind, addr: addr, key: key, attachment: attachment, chunks: max(1, chunks), target: target) } catch {
                    Thread.sleep(forTimeInterval: 0.05)  // the node closed the link or refused the handshake
                }
            }
        }
    }

    /// Stops the attack and returns what it did.
    func stop() -> AttackTally {
        stopped.set()
        finished.wait()
        return tally.withLock { $0 }
    }

    private func attack(_ kind: AttackKind, addr: String, key: SessionKey, attachment: String, chunks: Int, target: MemberID) throws {
        let member = try AdversaryMember(addr: addr, key: key, name: "attacker")
        let (identity, me, link) = (member.identity, member.info, member.link)
        defer { link.close() }
        tally.withLock { $0.links += 1 }
        func send(_ encoded: [UInt8]) throws {
            try link.write(encoded: encoded)
            tally.withLock { $0.linkMessages += 1; $0.bytes += encoded.count }
        }
        switch kind {
        case .claims: try claim(member, target: target)
        case .flood: try flood(me, identity, attachment: attachment, chunks: chunks, send)
        case .digests:
            // No activity stamp: this member shows it holds no value, so it is behind the victim's.
            let digest = LinkMessage.digest(CausalBroadcast.Digest(delivered: [:], storedFrom: [:]), activity: nil).encoded()
            while !stopped.isSet { try send(digest) }
        case .heldFlood:
            // Seq 1 never comes: everything above it waits for it.
            var seq: UInt64 = 1
            while !stopped.isSet {
                let batch = (0..<64).map { _ in
                    seq += 1
                    return WireMessage(origin: me.id, counter: seq, seq: seq, to: nil, body: [0x41])
                }
                for signed in MessageBatch.sign(batch, identity: identity) { try send(LinkMessage.message(signed).encoded()) }
            }
        }
    }

    /// The `claims` attack on one link: a claim that `target` failed every 50 ms, at the highest
    /// incarnation of it the node has told (it reads everything the node sends, and asks for a
    /// push-pull each round), and its own record at a new incarnation with each one (so its claims
    /// come from a live member).
    private func claim(_ member: AdversaryMember, target: MemberID) throws {
        let known = Mutex<UInt64>(0)
        member.link.startReading { message in
            let records: [MemberInfo]
            switch message {
            case let .pushPull(state), let .pushPullReply(state): records = state.members
            case let .swim(swim): records = swim.gossip.compactMap { if case let .alive(info) = $0 { info } else { nil } }
            default: records = []
            }
            for info in records where info.id == target { known.withLock { $0 = max($0, info.incarnation) } }
        }
        var mine: UInt64 = 1
        while !stopped.isSet {
            mine += 1
            try member.stayAlive(incarnation: mine)
            // A push-pull each round: the node's reply tells the claimed member's incarnation now.
            try member.link.write(.pushPull(SWIMPushPull(join: false, members: [member.info])))
            let claim = member.claim(failed: true, about: target, incarnation: known.withLock { $0 })
            try member.gossip([claim])
            tally.withLock { $0.linkMessages += 3 }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    private func flood(_ me: MemberInfo, _ identity: Identity, attachment: String, chunks: Int, _ send: ([UInt8]) throws -> Void) throws {
        // A 1 MiB body (the limit is 64 KiB), signed by the attacker as its own broadcast.
        let oversized = MessageBatch.sign([WireMessage(origin: me.id, counter: 1, seq: 1, to: nil, body: [UInt8](repeating: 0x41, count: 1 << 20))],
                                          identity: identity)[0]
        let huge = LinkMessage.message(oversized).encoded()
        var round = 0
        while !stopped.isSet {
            round += 1
            for i in 0..<64 { try send(LinkMessage.chunkRequest(id: attachment, index: UInt32((round * 64 + i) % chunks)).encoded()) }
            if round % 8 == 0 { try send(huge) }
            // Members nobody is (unsigned), and forged claims about them.
            let fakes = (0..<16).map { i in
                MemberInfo(id: MemberID(raw: UInt64(round) << 8 | UInt64(i)), node: [UInt8](repeating: UInt8(i), count: 32), name: "fake", addr: "127.0.0.1:9")
            }
            let gossip = fakes.map(SWIMGossip.alive) + fakes.map { SWIMGossip.failed($0.id, incarnation: 0, from: me.id) }
            try send(LinkMessage.swim(SWIMMessage(sender: me.id, kind: .gossip, gossip: gossip)).encoded())
        }
    }
}

extension Scenarios {
    /// One hostile member attacks one node of four, each attack of `AttackKind` on a fresh session:
    /// honest latency at that node with and without the attacker, and the node's peak memory.
    func underAttack() async throws -> [BenchRow] {
        var rows: [BenchRow] = []
        for kind in AttackKind.allCases { rows += try await underAttack(kind) }
        return rows
    }

    private func underAttack(_ kind: AttackKind) async throws -> [BenchRow] {
        let cluster = try HuddleCluster(binary: huddle, label: "atk")
        defer { cluster.stop() }
        try await cluster.start(4)
        let victim = 1
        // An attachment the attacked member holds, so that its chunk requests cost real reads.
        let source = try writeRandomFile("\(cluster.dir)/held.bin", mib: 8)
        let added = try await cluster.request(cluster.controls[victim], .attachAdd(path: source, name: nil, meta: .null)).attachment
        let id = added.id
        let chunks = Int(added.chunks)
        // The largest activity value, so that each record the victim sends costs what it can.
        _ = try await cluster.request(cluster.controls[victim], .activitySet(value: .string(String(repeating: "a", count: 16_000))))
        let count = quick ? 200 : 600
        let calm = try await collectLatencies(cluster, count: count, receivers: [victim])
        let before = cluster.usage()[victim].peakRSSMiB
        let target = MemberID(cluster.members[2]) ?? MemberID(raw: 1)
        let failures = try await FailureWatch(cluster.controls[victim], member: cluster.members[2])
        let attacker = FloodingAttacker(kind, addr: cluster.addrs[victim], keyFile: cluster.key, attachment: id, chunks: chunks, target: target)
        try await Task.sleep(for: .seconds(1))
        let attacked = try await collectLatencies(cluster, count: count, receivers: [victim])
        let tally = attacker.stop()
        let failed = await failures.stop()
        let peak = cluster.usage()[victim].peakRSSMiB
        let stats = try await cluster.request(cluster.controls[victim], .stats).report
        let refused = (stats["refused"]?.objectValue).map { o in o.compactMap { k, v in (v.intValue ?? 0) > 0 ? "\(k) \(v.intValue ?? 0)" : nil } } ?? []
        let attackedP50 = percentile(attacked, 0.5), calmP50 = percentile(calm, 0.5)
        let delivered = attacked.count >= count  // every honest broadcast reached the attacked member
        return [
            BenchRow(scenario: "under attack N=4: \(kind.rawValue)", measure: "256 B broadcast at the attacked member, median / p99 ms",
                     huddle: "\(fmt(attackedP50)) / \(fmt(percentile(attacked, 0.99))) (\(attacked.count) of \(count) delivered)",
                     comparison: "same member, no attacker: \(fmt(calmP50)) / \(fmt(percentile(calm, 0.99)))",
                     ratio: "attacked ÷ calm median = \(fmt(attackedP50 / calmP50, 1))×",
                     target: "honest messages keep arriving: " + (delivered ? "met" : "missed")
                        + (kind == .claims ? "; the claimed member failed at the attacked one \(failed) times: " + (failed == 0 ? "met" : "missed") : "")),
            BenchRow(scenario: "under attack N=4: \(kind.rawValue)", measure: "attacked member's peak RSS, MiB",
                     huddle: "\(fmt(peak, 0)) (attacker: \(tally.links) links, \(tally.linkMessages) link messages, \(fmt(Double(tally.bytes) / 1048576, 0)) MiB; refused: \(refused.isEmpty ? "none" : refused.joined(separator: ", ")))",
                     comparison: "before the attack: \(fmt(before, 0))", ratio: "",
                     target: "target < 128 MiB: " + (peak < 128 ? "met" : "missed")),
        ]
    }
}

/// Counts the `member` events with change `failed` about one member at one node, from when it is
/// made until `stop`.
private final class FailureWatch: Sendable {
    private let client: ControlClient
    private let counting: Task<Int, Never>

    init(_ control: String, member: String) async throws {
        let client = try await ControlClient.connect(path: control)
        _ = try await client.request(.subscribe(topics: [.members], since: nil))
        self.client = client
        counting = Task {
            var failed = 0
            do {
                for try await event in await client.events()
                    where event["change"]?.stringValue == "failed" && event["member"]?.objectValue?["member"]?.stringValue == member {
                    failed += 1
                }
            } catch {}
            return failed
        }
    }

    /// Stops watching; how many times the member was reported failed.
    func stop() async -> Int {
        await client.close()
        return await counting.value
    }
}
