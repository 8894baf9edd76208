import Foundation
import HuddleCrypto
import PropertyBased
import HuddleTestSupport
import Testing
@testable import HuddleCore

/// Issue 20, item 1: a property-based fuzzer over everything a peer can send. Each input builds a
/// message of one kind from extreme and random numbers (0, 1, 2^32 − 1, 2^53 − 1, 2^53,
/// `UInt64.max`, …) and random bytes, encodes it, damages the encoding (bit flips, truncation,
/// random tails, or bytes alone), then runs every decoder on it and hands whatever decodes to the
/// cores a node runs (membership, causal broadcast, journal, activity, replay window), then ticks
/// them. A trap anywhere kills the test process, so passing means no input of the run trapped.
/// And what the cores make from those inputs — their SWIM messages, push-pull state, digests and
/// activity records — must decode again at a peer (issue 33, item 1: a count accepted at the cap
/// made the next digest undecodable and cut an honest node off); each one that does not is counted
/// in `undecodable`, which must stay 0.
/// `make test` runs 20,000 inputs; `make fuzz` 1,000,000 (`HUDDLE_FUZZ_COUNT`). Each input is made
/// from the run's seed and its index, printed and written before it is fed (`FuzzRun`: the one that
/// trapped, after a trap), and the run prints how many inputs of each kind were made and decoded.

private let extremes: [UInt64] = [0, 1, 2, 255, 256, 65_535, 65_536, UInt64(UInt32.max), UInt64(UInt32.max) + 1,
                                  WireReader.maximumCount - 1, WireReader.maximumCount, WireReader.maximumCount + 1,
                                  UInt64(Int64.max), UInt64(Int64.max) + 1, .max - 1, .max]

/// The message kinds `FuzzInput.encoding` makes (every link message kind, datagrams, journal entries, batches).
private let kindCount = 24


/// How the encoding is damaged before decoding.
private enum Damage: Int, CaseIterable { case none, flip, truncate, tail, bytesOnly }

private let local = MemberID(raw: 1)
private let signer = Identity.generate()

/// One fuzz input: a message kind, numbers for its fields, free bytes, and a damage.
private struct FuzzInput: Sendable {
    var kind: Int
    var numbers: [UInt64]
    var bytes: [UInt8]
    var damage: Damage
    var position: Int

    func number(_ i: Int) -> UInt64 { numbers.isEmpty ? 0 : numbers[i % numbers.count] }
    func member(_ i: Int) -> MemberID { MemberID(raw: number(i) % 4 == 0 ? local.raw : number(i)) }
    func count(_ i: Int, max: Int) -> Int { Int(number(i) % UInt64(max + 1)) }

    var info: MemberInfo {
        MemberInfo(id: member(0), node: Array(bytes.prefix(32)) + [UInt8](repeating: 0, count: max(0, 32 - bytes.count)),
                   name: "n", addr: "10.0.0.1:\(number(1) % 70_000)", state: MemberState(rawValue: UInt8(number(2) % 6)) ?? .alive,
                   incarnation: number(3))
    }

    var gossip: SWIMGossip {
        switch number(4) % 4 {
        case 0: .alive(info)
        case 1: .suspect(member(5), incarnation: number(6), from: member(7))
        case 2: .failed(member(5), incarnation: number(6), from: member(7))
        default: .left(member(5), incarnation: number(6))
        }
    }

    var wire: WireMessage {
        WireMessage(origin: member(0), counter: number(1), seq: number(2), kind: number(3) % 2 == 0 ? .application : .journal,
                    deps: (0..<count(4, max: 3)).map { .init(member: member(5 + $0), seq: number(6 + $0)) },
                    to: number(7) % 2 == 0 ? nil : [member(8)], body: bytes)
    }

    /// A clock of two entries (one when the two members coincide).
    func clock(_ i: Int) -> [MemberID: UInt64] {
        Dictionary([(member(i), number(i + 1)), (member(i + 2), number(i + 3))], uniquingKeysWith: { a, _ in a })
    }

    var bitfield: Bitfield { Bitfield(bytes: bytes, count: count(1, max: bytes.count * 8)) ?? Bitfield(count: 0) }

    /// The message, encoded as the kind says.
    var encoding: [UInt8] {
        switch kind % kindCount {
        case 0: LinkMessage.hello(since: number(0), nonApplication: number(1)).encoded()
        case 1: LinkMessage.pushPull(SWIMPushPull(join: number(9) % 2 == 0, members: [info])).encoded()
        case 2: LinkMessage.swim(SWIMMessage(sender: member(8), kind: .gossip, gossip: [gossip])).encoded()
        case 3: LinkMessage.message(MessageBatch.sign([wire], identity: signer)[0]).encoded()
        case 4: LinkMessage.digest(.init(delivered: clock(0), storedFrom: [member(0): number(4)]),
                                   activity: number(5) % 2 == 0 ? nil : ActivityStamp(lamport: number(6), member: member(7))).encoded()
        case 5: LinkMessage.request(origin: member(0), from: number(1), to: number(2)).encoded()
        case 6: LinkMessage.baseline(clock(0), nonApplication: clock(1)).encoded()
        case 7: LinkMessage.activity(ActivityRecord.make(lamport: number(0), setBy: member(1), value: bytes, identity: signer)).encoded()
        case 8: LinkMessage.journal([.remove(id: String(decoding: bytes.prefix(40), as: UTF8.self))]).encoded()
        case 9: LinkMessage.have(id: "x", have: bitfield, offer: bitfield).encoded()
        case 10: LinkMessage.chunkRequest(id: "x", index: UInt32(truncatingIfNeeded: number(0))).encoded()
        case 11: LinkMessage.chunkHeader(id: "x", index: UInt32(truncatingIfNeeded: number(0)), length: UInt32(truncatingIfNeeded: number(1))).encoded()
        case 12: DatagramPayload(sender: member(8), counter: number(9), content: .swim(SWIMMessage(sender: member(8), kind: .ping(seq: UInt32(truncatingIfNeeded: number(10)), target: member(11)), gossip: [gossip]))).encoded()
        case 13: DatagramPayload(sender: member(0), counter: number(9), content: .message(wire)).encoded()
        case 14: journalAddEncoding
        case 15: batchEncoding
        case 16: number(2) % 2 == 0 ? LinkMessage.timeRequest(wallMicros: number(0)).encoded() : LinkMessage.timeReply(echo: number(0), wallMicros: number(1)).encoded()
        case 17: LinkMessage.observed(link: String(decoding: bytes.prefix(20), as: UTF8.self), datagram: "\(number(0) % 256).0.0.1:\(number(1) % 70_000)").encoded()
        case 18:
            switch number(2) % 6 {
            case 0: LinkMessage.circuitRequest(peer: member(0)).encoded()
            case 1: LinkMessage.circuitOffer(peer: member(0)).encoded()
            case 2: LinkMessage.circuitAccept(peer: member(0)).encoded()
            case 3: LinkMessage.circuitRefuse(peer: member(0), reason: String(decoding: bytes.prefix(40), as: UTF8.self)).encoded()
            case 4: LinkMessage.circuitData(peer: member(0), bytes: bytes).encoded()
            default: LinkMessage.circuitClose(peer: member(0)).encoded()
            }
        case 19: LinkMessage.participants(participantRecord).encoded()
        case 20: LinkMessage.epochHead(epoch: number(0), head: Array((bytes + [UInt8](repeating: 0, count: 32)).prefix(32)), holdsKey: number(1) % 2 == 0).encoded()
        case 21: LinkMessage.directedAck(through: number(0)).encoded()
        case 22: LinkMessage.unreliable(wire).encoded()
        default: LinkMessage.punch(attempt: UInt32(truncatingIfNeeded: number(0)), step: HolePunch.Step(rawValue: UInt8(number(1) % 3)) ?? .connect,
                                   addrs: number(2) % 2 == 0 ? [] : [String(decoding: bytes.prefix(70), as: UTF8.self), testAddr("o")]).encoded()
        }
    }

    /// A member's programs (link message 21), signed by `signer`: up to 3 programs, ids and version
    /// from the numbers, activities from the free bytes (empty, long or not UTF-8 included).
    var participantRecord: ParticipantRecord {
        let programs = (0..<count(2, max: 3)).map { i in
            ProgramPresence(id: number(3 + i), activity: String(decoding: bytes.prefix(Int(number(6 + i) % 90)), as: UTF8.self))
        }
        return ParticipantRecord.make(member: member(0), version: number(1), programs: programs, identity: signer)
    }

    /// An attachment added to the journal: a manifest signed by `signer` with a 32-byte key.
    var journalAddEncoding: [UInt8] {
        let key = Array((bytes + [UInt8](repeating: 5, count: 32)).prefix(32))
        var manifest = Manifest(name: "m", size: number(0), chunkSize: UInt32(truncatingIfNeeded: number(1)),
                                chunkHashes: (0..<count(2, max: 4)).map { _ in [UInt8](repeating: 1, count: 32) }, meta: bytes,
                                uploader: member(3), uploaderNodeKey: signer.publicKey, signature: [])
        manifest.sign(with: signer, key: key)
        return JournalEntry.add(manifest, key: key).encoded()
    }

    /// A signed flush of two messages as a batch (or the first alone when none is for us).
    var batchEncoding: [UInt8] {
        let flush = MessageBatch.sign([wire, wire], identity: signer)
        return (SignedBatch(of: flush, for: local).map(LinkMessage.batch) ?? .message(flush[0])).encoded()
    }

    /// The bytes the decoders see.
    var damaged: [UInt8] {
        var b = encoding
        switch damage {
        case .none: break
        case .flip: if !b.isEmpty { b[position % b.count] ^= UInt8(truncatingIfNeeded: 1 << (number(0) % 8)) }
        case .truncate: b = Array(b.prefix(position % (b.count + 1)))
        case .tail: b += bytes
        case .bytesOnly: b = bytes
        }
        return b
    }
}

/// Inputs: a third of the numbers from `extremes`, a third small (what honest members send), a
/// third uniformly random; no shrinking (a trap ends the
/// process, so there is nothing to shrink, and the stack trace names the site).
private let inputGen = Generator<FuzzInput, Shrink.None<FuzzInput>> { rng in
    func number() -> UInt64 {
        switch UInt8.random(in: 0..<3, using: &rng) {
        case 0: extremes.randomElement(using: &rng) ?? 0
        case 1: UInt64.random(in: 0...1_000, using: &rng)
        default: UInt64.random(in: 0 ... .max, using: &rng)
        }
    }
    return FuzzInput(kind: Int.random(in: 0..<kindCount, using: &rng),
                     numbers: (0..<Int.random(in: 1...12, using: &rng)).map { _ in number() },
                     bytes: (0..<Int.random(in: 0...80, using: &rng)).map { _ in UInt8.random(in: 0 ... .max, using: &rng) },
                     damage: Damage.allCases.randomElement(using: &rng) ?? .none,
                     position: Int.random(in: 0...4096, using: &rng))
}

/// The cores a node runs, fed with whatever decodes.
private struct Cores {
    var swim = SWIMInstance(local: MemberInfo(id: local, node: [UInt8](repeating: 3, count: 32), name: "me", addr: testAddr("h")), seed: 1, signer: UncheckedMembershipSigner())
    var broadcast = CausalBroadcast(local: local, awaitingBaseline: true)
    var journal = Journal(local: local, seed: 1)
    var activity = ActivityRegister()
    var timing = LinkTiming()
    var reach = ReachObservations()
    var relay = RelayCircuits(local: local)
    var routes = RelayRoutes(local: local)
    var punch = HolePunch(local: local)
    var replay = ReplayWindow()
    var presence = ParticipantTable()
    /// What the cores made that a peer's decoder refused, with what it was.
    var undecodable: [String] = []
    /// Link keys held with the senders of what decodes as a datagram payload (up to 64): each is
    /// also sealed under its sender's key, opened, and its counter checked, as the node would.
    var keys = DatagramKeyring()
    static let sessionSeal = DatagramSeal(key: [UInt8](repeating: 7, count: 32))

    /// Whether any decoder a node runs on peer bytes takes `bytes`.
    func decodes(_ bytes: [UInt8]) -> Bool {
        (try? LinkMessage.decode(bytes)) != nil || (try? DatagramPayload.decode(bytes)) != nil || (try? JournalEntry.decode(bytes)) != nil
    }

    mutating func feed(_ bytes: [UInt8], now: Double) {
        if let message = try? LinkMessage.decode(bytes) { feed(message, from: MemberID(raw: 2), now: now) }
        _ = try? DatagramOpener(local: local, session: Self.sessionSeal, keys: keys).open(bytes)
        if let payload = try? DatagramPayload.decode(bytes) {
            _ = replay.accept(payload.counter)
            let sender = PairDatagramKeys(seed: withUnsafeBytes(of: payload.sender.raw) { Array($0) })
            if !keys.has(payload.sender) && keys.members.count < 64 { keys.install(sender.reversed, for: payload.sender, current: true, now: now) }
            let sealed = PairDatagramSeal.seal(bytes, from: payload.sender, to: local, keyID: sender.sendID, key: sender.send)
            if let opened = try? DatagramOpener(local: local, session: Self.sessionSeal, keys: keys).open(sealed), case let .link(serial) = opened.form {
                _ = keys.check(opened.payload.sender, serial: serial, counter: opened.payload.counter)
            }
            if case let .swim(m) = payload.content { _ = swim.receive(m, from: testAddr("h", port: 2), now: now) }
        }
        if let m = try? SWIMMessage.decode(bytes) { _ = swim.receive(m, from: testAddr("h", port: 2), now: now) }
        if let state = try? SWIMPushPull.decode(bytes) { _ = swim.receivePushPull(state.members, join: state.join, from: testAddr("h", port: 2), now: now) }
        if let entry = try? JournalEntry.decode(bytes) { _ = journal.apply(entry, now: now) }
        _ = try? EpochChange.decode(bytes)
        _ = try? EpochGrant.decode(bytes)
        var reassembler = LinkReassembler(limit: 1 << 16)
        _ = try? reassembler.add(bytes)
    }

    mutating func feed(_ message: LinkMessage, from peer: MemberID, now: Double) {
        switch message {
        case let .hello(since, _): _ = broadcast.linkHello(origin: peer, seq: since)
        case let .pushPull(s), let .pushPullReply(s): _ = swim.receivePushPull(s.members, join: s.join, from: testAddr("h", port: 2), now: now)
        case let .swim(m): _ = swim.receive(m, from: testAddr("h", port: 2), now: now)
        case let .message(signed): _ = broadcast.receive(signed)
        case let .batch(batch): for m in batch.messages { _ = broadcast.receive(m) }
        case let .digest(d, stamp):
            _ = broadcast.receiveDigest(d, from: peer, now: now)
            if let stamp, let mine = activity.stamp { _ = stamp < mine }
        case let .request(origin, from, to): _ = broadcast.stored(origin: origin, from: from, to: to)
        case let .baseline(clock, _): _ = broadcast.adoptBaseline(clock)
        case let .activity(record):
            _ = activity.apply(record)
            let next = ActivityRecord.make(lamport: activity.nextLamport(wallClock: 0), setBy: local, value: [1], identity: signer)
            check(LinkMessage.activity(next).encoded(), "activity at \(next.lamport)", LinkMessage.decode)
        case let .journal(entries): for e in entries { _ = journal.apply(e, now: now) }
        case let .have(id, have, offer): journal.receiveHave(peer, id: id, have: have, offer: offer, now: now)
        case let .chunkRequest(id, index), let .chunkCorrupt(id, index): _ = journal.holds(id, Int(index))
        case .chunkHeader, .epochChanges, .epochGrant, .epochHead: break  // epochs: EpochInputFuzzTests
        // A request whose wall time is taken as this member's own (a clock anywhere in range), then
        // a reply to it and one to whatever the peer says.
        case let .timeRequest(wall):
            _ = timing.requests(to: [peer], wall: Double(wall) / 1e6, now: now, force: true)
            timing.reply(from: peer, echo: LinkTiming.wallMicros(Double(wall) / 1e6), peerMicros: ~wall, wall: Double(wall) / 1e6, now: now)
        case let .timeReply(echo, wall): timing.reply(from: peer, echo: echo, peerMicros: wall, wall: Double(wall) / 1e6, now: now)
        case let .participants(record):
            check(LinkMessage.participants(record).encoded(), "participants of \(record.member)", LinkMessage.decode)
            _ = record.verify(nodeKey: signer.publicKey)
            if ParticipantTable.withinBudget(record) { _ = presence.show(record.member, Set(record.programs)) }
        case let .observed(link, datagram):
            reach.receive(from: peer, link: link, datagram: datagram, now: now)
            _ = reach.nat(advertised: testAddr("h"))
        // The relay's and an end's rules, with the sender and the named peer linked.
        case let .circuitRequest(other), let .circuitOffer(other), let .circuitAccept(other), let .circuitClose(other), let .circuitRefuse(other, _):
            relay.linkUp(peer); relay.linkUp(other)
            _ = relay.open(from: peer, to: other, now: now)
            _ = routes.offered(other, via: peer, linked: false, live: true, direct: true, now: now)
            _ = relay.accept(from: peer, to: other)
            _ = routes.accepted(other, via: peer)
            _ = routes.tick(unlinked: [other], relays: [peer], now: now)
        case let .circuitData(other, bytes):
            _ = relay.forward(bytes.count, from: peer, to: other, queued: bytes.count, now: now)
            routes.closed(other, via: peer, now: now)
        // Both ends' rules: the step as it came (relayed, then not), and the starter's tick after it.
        case let .punch(attempt, step, addrs):
            _ = punch.receive(step, attempt: attempt, from: peer, peerAddresses: [testAddr("p")], offered: addrs, own: [testAddr("q")], now: now)
            _ = punch.receive(step, attempt: attempt, from: peer, peerAddresses: nil, own: [], now: now)
            _ = punch.tick(relayed: [peer: [testAddr("p")]], own: [testAddr("h")], now: now)
        // An acknowledgement drops only what was sent to its sender, never past this member's counter.
        case let .directedAck(through): broadcast.directedAcknowledged(by: peer, through: through)
        // What the core checks before it delivers one: its origin and body, as a datagram's.
        case let .unreliable(m): _ = m.origin == peer && m.seq == 0 && m.body.count <= SessionCore.Limits.unreliableCeiling
        }
    }

    /// Records `what` when `decode` refuses `bytes`.
    mutating func check<T>(_ bytes: [UInt8], _ what: @autoclosure () -> String, _ decode: ([UInt8]) throws -> T) {
        if (try? decode(bytes)) == nil, undecodable.count < 16 { undecodable.append(what()) }
    }

    mutating func tick(now: Double) {
        for case let .send(message, _) in swim.tick(now: now) { check(message.encode(), "SWIM \(message)", SWIMMessage.decode) }
        check(SWIMPushPull(join: false, members: swim.pushPullState() + [swim.local]).encode(), "push-pull", SWIMPushPull.decode)
        let digest = broadcast.digest()
        check(LinkMessage.digest(digest, activity: activity.stamp).encoded(), "digest \(digest)", LinkMessage.decode)
        _ = broadcast.setMembers(Set(swim.members.keys).union([local, MemberID(raw: 2)]), now: now)
        journal.setPeers(Set(swim.members.keys))
        _ = journal.tick(now: now, linked: swim.members.keys.sorted())
        let own = broadcast.makeBroadcast(body: [1])
        check(LinkMessage.message(MessageBatch.sign([own], identity: signer)[0]).encoded(), "own broadcast", LinkMessage.decode)
    }
}

@Test func noInputAPeerCanSendTrapsTheDecodersOrTheCores() {
    let run = FuzzRun("link")
    let fuzzCount = run.count
    var cores = Cores()
    var now = 0.0, fed = 0
    var undecodable: [String] = []
    // Per kind: inputs made, and undamaged ones the decoders took (each kind must be reached).
    var made = [Int](repeating: 0, count: kindCount), decoded = [Int](repeating: 0, count: kindCount)
    for index in 0..<fuzzCount {
        var rng = run.random(index)
        let input = inputGen.run(using: &rng)
        // Fresh cores every 500 inputs: state accumulates (members, stored messages) within a run,
        // and stays small enough that a million inputs take minutes, not hours.
        if fed % 500 == 0 {
            undecodable += cores.undecodable
            cores = Cores()
        }
        fed += 1
        now += 0.01
        let bytes = input.damaged
        run.record(index, bytes)
        let kind = input.kind % kindCount
        made[kind] += 1
        if input.damage == .none, cores.decodes(bytes) { decoded[kind] += 1 }
        cores.feed(bytes, now: now)
        cores.tick(now: now)
    }
    undecodable += cores.undecodable
    print("fuzz: \(fuzzCount) inputs; per kind made/decoded undamaged: \((0..<kindCount).map { "\($0):\(made[$0])/\(decoded[$0])" }.joined(separator: " "))")
    // Every kind is made and, undamaged, decodes at least a few times in any run (1 in 5 inputs is
    // undamaged; numbers past a limit make some of them refused, as they should be).
    for kind in 0..<kindCount {
        #expect(made[kind] >= fuzzCount / kindCount / 2, "kind \(kind) made only \(made[kind]) times")
        #expect(decoded[kind] >= fuzzCount / kindCount / 100, "kind \(kind) decoded undamaged only \(decoded[kind]) times")
    }
    #expect(undecodable.isEmpty, "the cores made what a peer cannot decode: \(undecodable.prefix(4))")
}

/// The fuzz runs' generator drives the property-based generators (`Generator.run(using:)`).
extension SWIMRandom: SeededRandomNumberGenerator {
    public init() { self.init(seed: UInt64.random(in: 0 ... .max)) }
}
