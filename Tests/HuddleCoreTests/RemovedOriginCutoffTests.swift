import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 33: a removed member's broadcasts after its removal are refused everywhere — the change
/// that removes it carries, signed by its maker, a cut-off per origin (the highest of its
/// broadcasts the maker had delivered); every member delivers up to it (repairing what it lacks)
/// and refuses everything above it, relayed by anyone. Four cores: the maker (0), two honest
/// members (1, 2) and the member that is removed (3). Link messages are passed by hand.
private struct Quartet {
    static let maker = 0, a = 1, b = 2, removed = 3
    var cores: [SessionCore]
    let infos: [MemberInfo]
    /// Per core, the seqs of the removed member's broadcasts it delivered, in order.
    var deliveredFromRemoved: [[UInt64]] = [[], [], [], []]
    /// Per core, the bodies of broadcasts from honest origins it delivered.
    var deliveredHonest: [[[UInt8]]] = [[], [], [], []]

    init() {
        let genesis = (try? SessionKey(bytes: [UInt8](repeating: 7, count: 32))) ?? SessionKey.generate()
        var infos: [MemberInfo] = []
        var cores: [SessionCore] = []
        for raw in UInt64(1)...4 {
            let identity = Identity(seed: [UInt8](repeating: UInt8(raw), count: 32))
            let info = MemberInfo(id: MemberID(raw: raw), node: identity.publicKey, name: "m\(raw)", addr: testAddr("m\(raw)")).signed(by: identity)
            infos.append(info)
            cores.append(SessionCore(local: info, identity: identity, joining: false, swimSeed: raw, journalSeed: raw,
                                     sessionKey: genesis, epochRandom: SWIMRandom(seed: raw)))
        }
        self.infos = infos
        self.cores = cores
        for i in 0..<4 { _ = self.cores[i].receivePushPull(SWIMPushPull(join: false, members: infos), from: testAddr("m1"), now: 0) }
        for i in 0..<4 {
            for j in 0..<4 where i < j {
                try? self.cores[i].admitLink(infos[j], now: 0)
                try? self.cores[j].admitLink(infos[i], now: 0)
                let hi = self.cores[i].linkUp(infos[j].id), hj = self.cores[j].linkUp(infos[i].id)
                _ = self.cores[j].receiveLink(hi, from: infos[i].id, addr: infos[i].addr, now: 0)
                _ = self.cores[i].receiveLink(hj, from: infos[j].id, addr: infos[j].addr, now: 0)
            }
        }
    }

    /// A broadcast of core `i`, signed (its own batch), as a link message.
    mutating func broadcast(_ i: Int, _ body: [UInt8]) throws -> LinkMessage {
        _ = try cores[i].send(body: body, to: nil, reliable: true)
        for case let .sendToLinks(message) in cores[i].flushBatch() { return message }
        throw AdversaryFailure("core \(i) flushed no batch")
    }

    /// Core `to` receives `message` over its link from `from`, and everything that follows among
    /// the honest cores (0...2) is carried until quiet.
    mutating func give(_ message: LinkMessage, to: Int, from: Int, now: Double) {
        var queue = [(to, from, message)]
        while !queue.isEmpty {
            let (j, sender, m) = queue.removeFirst()
            let effects = cores[j].receiveLink(m, from: infos[sender].id, addr: infos[sender].addr, now: now)
            note(effects, at: j)
            queue += outgoing(effects, from: j)
        }
    }

    /// What `effects` of core `i` send to honest cores (0...2) that are linked to it. Epoch
    /// messages are not carried: the tests hand the change to each member when they choose.
    func outgoing(_ effects: [SessionEffect], from i: Int) -> [(Int, Int, LinkMessage)] {
        var out: [(Int, Int, LinkMessage)] = []
        func carried(_ m: LinkMessage) -> Bool {
            switch m {
            case .epochChanges, .epochGrant, .epochHead: false
            default: true
            }
        }
        for effect in effects {
            switch effect {
            case let .sendLink(peer, m) where carried(m):
                if let j = index(peer), j < 3, cores[i].planner.linked.contains(peer) { out.append((j, i, m)) }
            case let .sendToLinks(m) where carried(m):
                for j in 0..<3 where j != i && cores[i].planner.linked.contains(infos[j].id) { out.append((j, i, m)) }
            case let .repairRequest(peer, origin, from, to):
                if let j = index(peer), j < 3 { out.append((j, i, .request(origin: origin, from: from, to: to))) }
            default: break
            }
        }
        return out
    }

    mutating func note(_ effects: [SessionEffect], at i: Int) {
        for case let .deliver(signed) in effects {
            if signed.message.origin == infos[Self.removed].id { deliveredFromRemoved[i].append(signed.message.seq) } else { deliveredHonest[i].append(signed.message.body) }
        }
        for case let .closeLink(peer) in effects { _ = cores[i].linkDown(peer, settled: false, now: 0) }
    }

    /// Digests among the honest cores, each round half a second later, so that what is missing is repaired.
    mutating func antiEntropy(from start: Double, rounds: Int = 12) {
        for round in 0..<rounds {
            let now = start + Double(round) * 0.5
            for i in 0..<3 {
                for j in 0..<3 where j != i {
                    give(.digest(cores[i].broadcast.digest(), activity: nil), to: j, from: i, now: now)
                }
            }
        }
    }

    func index(_ id: MemberID) -> Int? { infos.firstIndex { $0.id == id } }
    var removedID: MemberID { infos[Self.removed].id }
}

private struct AdversaryFailure: Error { let text: String; init(_ text: String) { self.text = text } }

/// The removed member keeps sending while the removal propagates. The maker had delivered its
/// broadcasts 1...4 (member 1 only 1...2, member 2 none); member 1 hears of the removal first, then
/// the removed member's 5 and 6 reach both (member 1 by a relay, member 2 straight from it, before
/// member 2 heard of the removal). Every honest member ends with exactly 1...4: member 1 refuses 5
/// and 6, member 2 held them (it lacked 1...4) and drops them when it hears, and both repair 3...4 (and
/// 1...4) from the maker. Before: 5 and 6 were delivered wherever they arrived, and repaired from
/// there to everyone.
@Test func everyHonestMemberDeliversExactlyTheRemovedMembersBroadcastsUpToTheCutoff() throws {
    var q = Quartet()
    let x = Quartet.removed
    var sent: [LinkMessage] = []
    for n in 1...6 { sent.append(try q.broadcast(x, [UInt8(n)])) }
    for n in 0..<4 { q.give(sent[n], to: Quartet.maker, from: x, now: 1) }
    for n in 0..<2 { q.give(sent[n], to: Quartet.a, from: x, now: 1) }
    #expect(q.deliveredFromRemoved[Quartet.maker] == [1, 2, 3, 4] && q.deliveredFromRemoved[Quartet.a] == [1, 2])

    let (change, effects) = try q.cores[Quartet.maker].remove(nodes: [q.infos[x].node], now: 2)
    #expect(change.cutoffs == [EpochChange.Cutoff(origin: q.removedID, node: q.infos[x].node, seq: 4)], "the maker signs what it delivered")
    q.note(effects, at: Quartet.maker)
    // Member 1 hears of the removal; member 2 not yet.
    q.give(.epochChanges([change]), to: Quartet.a, from: Quartet.maker, now: 2)
    #expect(q.cores[Quartet.a].epochs.cutoff(of: q.removedID, node: q.infos[x].node) == 4)
    // The removed member's 5 and 6: to member 1 through a relay (member 2's link), to member 2 straight.
    for n in 4..<6 {
        q.give(sent[n], to: Quartet.a, from: Quartet.b, now: 2.5)
        q.give(sent[n], to: Quartet.b, from: x, now: 2.5)
    }
    #expect(q.cores[Quartet.a].refusals[.afterRemoval] == 2, "member 1 refuses the two broadcasts after the cut-off")
    q.give(.epochChanges([change]), to: Quartet.b, from: Quartet.maker, now: 3)
    q.antiEntropy(from: 3)
    for i in 0..<3 {
        #expect(q.deliveredFromRemoved[i] == [1, 2, 3, 4], "member \(i) delivered \(q.deliveredFromRemoved[i]) of the removed member")
        #expect(q.cores[i].broadcast.delivered[q.removedID] == 4)
        #expect(q.cores[i].broadcast.heldCount == 0, "member \(i) holds nothing of it")
    }
    // Later ones, relayed by anyone, are refused and counted at every member.
    let later = try q.broadcast(x, [7])
    for i in 0..<3 {
        let before = q.cores[i].refusals[.afterRemoval]
        q.give(later, to: i, from: (i + 1) % 3, now: 10)
        #expect(q.cores[i].refusals[.afterRemoval] == before + 1)
        #expect(q.deliveredFromRemoved[i] == [1, 2, 3, 4])
    }
}

/// A member that delivered a removed member's broadcast above the cut-off *before* it heard of
/// the removal keeps it, and its own next broadcast depends on it: the others never deliver that
/// broadcast (refused above the cut-off) and still deliver the honest message, which does not wait
/// for it. Before the dependency rule (with the cut-off alone), the honest message waited for ever.
@Test func anHonestMessageThatDependsOnABroadcastAboveTheCutoffIsNotHeldForIt() throws {
    var q = Quartet()
    let x = Quartet.removed
    var sent: [LinkMessage] = []
    for n in 1...3 { sent.append(try q.broadcast(x, [UInt8(n)])) }
    for n in 0..<2 { q.give(sent[n], to: Quartet.maker, from: x, now: 1) }
    for n in 0..<3 { q.give(sent[n], to: Quartet.a, from: x, now: 1) }
    let (change, effects) = try q.cores[Quartet.maker].remove(nodes: [q.infos[x].node], now: 2)
    q.note(effects, at: Quartet.maker)
    // Member 1 delivered 3 before it heard; its reply depends on it.
    let reply = try q.broadcast(Quartet.a, Array("reply".utf8))
    guard case let .batch(batch) = reply else { Issue.record("not a batch: \(reply)"); return }
    #expect(batch.messages.first?.message.deps.contains(.init(member: q.removedID, seq: 3)) == true)
    q.give(.epochChanges([change]), to: Quartet.a, from: Quartet.maker, now: 2)
    q.give(.epochChanges([change]), to: Quartet.b, from: Quartet.maker, now: 2)
    q.give(reply, to: Quartet.b, from: Quartet.a, now: 2)
    q.give(reply, to: Quartet.maker, from: Quartet.a, now: 2)
    q.antiEntropy(from: 3)
    for i in [Quartet.maker, Quartet.b] {
        #expect(q.deliveredFromRemoved[i] == [1, 2], "member \(i) delivered \(q.deliveredFromRemoved[i]) of the removed member")
        #expect(q.deliveredHonest[i].contains(Array("reply".utf8)), "member \(i) still waits for a broadcast above the cut-off")
    }
    #expect(q.deliveredFromRemoved[Quartet.a] == [1, 2, 3], "what member 1 delivered before it heard stays delivered")
}

/// A cut-off is the maker's signed word about one origin and the node key it removes: a hostile
/// maker cannot cut off an honest member by naming its id with a removed node key (the id is
/// pinned to another node key), nor name a node key it does not remove (malformed), and the
/// highest cut-off of several removing changes counts.
@Test func aCutoffCountsOnlyForTheNodeKeyItsChangeRemoves() throws {
    var g = EpochGroup(3, seed: 77)
    let victim = MemberID(raw: 2), removedID = MemberID(raw: 3)
    let bogus = try EpochChange.make(session: g.genesis.sessionID, epoch: 1, parent: g.genesis.head, maker: MemberID(raw: 1),
                                     identity: g.members[0].identity, madeAt: 1000, removed: [g.node(2)],
                                     cutoffs: [.init(origin: victim, node: g.node(1), seq: 0)], roster: [g.node(0), g.node(1)],
                                     key: randomBytes(32, &g.rng), sealSeed: randomBytes(32, &g.rng))
    #expect(bogus.validate() == .epochMalformed, "a cut-off for a node key the change does not remove")
    #expect(g.members[1].receive(bogus, now: 1) == .refused(.epochMalformed))
    let low = try g.members[0].remove([g.node(2)], members: g.view(0), origins: [.init(origin: removedID, node: g.node(2), seq: 5),
                                                                                    .init(origin: victim, node: g.node(1), seq: 9)],
                                      now: 1, using: &g.rng)
    #expect(low.cutoffs == [.init(origin: removedID, node: g.node(2), seq: 5)], "only origins of the removed node key")
    // A concurrent removal by member 1 that had delivered more: the highest counts, at both.
    var other = EpochGroup(3, seed: 77)
    let high = try other.members[1].remove([g.node(2)], members: other.view(1), origins: [.init(origin: removedID, node: g.node(2), seq: 8)],
                                           now: 1, using: &other.rng)
    g.deliver([high], to: [0], now: 2)
    g.deliver([low, high], to: [1], now: 2)
    for i in 0...1 { #expect(g.members[i].cutoff(of: removedID, node: g.node(2)) == 8) }
    #expect(g.members[0].cutoff(of: victim, node: g.node(1)) == nil)
}

/// A later change that "removes" an already removed node key again (any member may make a change)
/// does not raise the cut-off its removal set: otherwise one hostile member could let every later
/// broadcast of the removed member through again.
@Test func removingARemovedKeyAgainDoesNotRaiseItsCutoff() throws {
    var g = EpochGroup(3, seed: 78)
    let removedID = MemberID(raw: 3)
    let removal = try g.members[0].remove([g.node(2)], members: g.view(0), origins: [.init(origin: removedID, node: g.node(2), seq: 5)],
                                          now: 1, using: &g.rng)
    g.deliver([removal], to: [1], now: 1)
    for i in 0...1 { #expect(g.members[i].cutoff(of: removedID, node: g.node(2)) == 5) }
    let again = try EpochChange.make(session: g.genesis.sessionID, epoch: 2, parent: removal.hash, maker: MemberID(raw: 2),
                                     identity: g.members[1].identity, madeAt: 2000, removed: [g.node(2)],
                                     cutoffs: [.init(origin: removedID, node: g.node(2), seq: WireReader.madeCountLimit)],
                                     roster: [g.node(0), g.node(1)], key: randomBytes(32, &g.rng), sealSeed: randomBytes(32, &g.rng))
    _ = g.members[0].receive(again, now: 3)
    #expect(g.members[0].cutoff(of: removedID, node: g.node(2)) == 5, "the second removal's cut-off counted")
}

/// The wire form carries cut-offs and the signed time, and a change that claims either beyond the
/// bounds (a seq or time above 2^52, more than `maxCutoffs`) does not decode.
@Test func cutoffsAndTheSignedTimeRoundTripWithinTheirBounds() throws {
    var g = EpochGroup(2, seed: 5)
    let change = try EpochChange.make(session: g.genesis.sessionID, epoch: 1, parent: g.genesis.head, maker: MemberID(raw: 1),
                                      identity: g.members[0].identity, madeAt: 1_700_000_000_000, removed: [g.node(1)],
                                      cutoffs: [.init(origin: MemberID(raw: 9), node: g.node(1), seq: 3), .init(origin: MemberID(raw: 2), node: g.node(1), seq: 4)],
                                      roster: [g.node(0)], key: randomBytes(32, &g.rng), sealSeed: randomBytes(32, &g.rng))
    #expect(change.cutoffs.map(\.origin) == [MemberID(raw: 2), MemberID(raw: 9)], "canonical: member order")
    #expect(try EpochChange.decode(change.encoded()) == change && change.validate() == nil)
    var huge = change
    huge.madeAt = WireReader.madeCountLimit + 1
    #expect(throws: CoreError.self) { try EpochChange.decode(huge.encoded()) }
    huge = change
    huge.cutoffs[0].seq = WireReader.madeCountLimit + 1
    #expect(throws: CoreError.self) { try EpochChange.decode(huge.encoded()) }
    huge = change
    huge.cutoffs = (0...EpochChange.maxCutoffs).map { EpochChange.Cutoff(origin: MemberID(raw: UInt64($0)), node: g.node(1), seq: 1) }
    #expect(throws: CoreError.self) { try EpochChange.decode(huge.encoded()) }
}
