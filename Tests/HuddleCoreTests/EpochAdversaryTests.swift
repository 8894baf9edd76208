import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 33: the epoch invariants against a hostile member that holds the key — it equivocates,
/// forges rosters, grinds hashes and races removals (see the note at the top of EpochHistory.swift).
/// Members 0 and 1 are honest, 2 is the hostile member, 3 its puppet (a node key it runs as a member).
@Suite struct EpochAdversaryTests {
    static let honest = 0, other = 1, hostile = 2, puppet = 3

    /// A change by `maker` on `parent` with exactly `roster` (and `removed`), ground until `accept` holds.
    static func forged(_ g: inout EpochGroup, by maker: Int, parent: [UInt8], epoch: UInt64, roster: [[UInt8]], removed: [[UInt8]] = [],
                       until accept: (EpochChange) -> Bool = { _ in true }) throws -> EpochChange {
        for _ in 0..<200 {
            let change = try EpochChange.make(session: g.genesis.sessionID, epoch: epoch, parent: parent, maker: MemberID(raw: UInt64(maker + 1)),
                                              identity: g.members[maker].identity, removed: removed, roster: roster,
                                              key: randomBytes(32, &g.rng), sealSeed: randomBytes(32, &g.rng))
            if accept(change) { return change }
        }
        throw EpochError.cannotSeal
    }

    /// The confirmed attack on `drop(subtree:)`: the puppet made epoch 1, the honest members removed
    /// the hostile member on top of it, then the puppet signs a lower-hash sibling of its own change
    /// with the hostile member back on the roster. The removal stays, the puppet is excluded as an
    /// equivocator, and the session does not go back to epoch 1.
    @Test func anEquivocatorsLowerSiblingUndoesNoRemoval() throws {
        var g = EpochGroup(4, seed: 41)
        let first = try g.rekey(Self.puppet, now: 1)
        g.deliver([first], to: [0, 1, 2], now: 1)
        let removal = try g.remove(Self.honest, [Self.hostile], now: 2)
        g.deliver([removal], to: [1, 3], now: 2)
        let twin = try Self.forged(&g, by: Self.puppet, parent: g.genesis.head, epoch: 1, roster: g.nodes) { bytesPrecede($0.hash, first.hash) }
        for i in [Self.honest, Self.other] {
            _ = g.members[i].receive(twin, now: 3)
            #expect(g.members[i].removedNodes[g.node(Self.hostile)] != nil, "member \(i): the removal was undone")
            #expect(g.members[i].admission(of: g.node(Self.hostile), holding: g.genesis.head, now: 3) == .refused(.removedNode))
            #expect(g.members[i].epoch >= 2, "member \(i): the session went back to epoch \(g.members[i].epoch)")
            #expect(!(g.members[i].roster ?? []).contains(g.node(Self.hostile)), "member \(i): the removed key is on the head's roster")
            #expect(g.members[i].equivocators == [g.node(Self.puppet)])
            #expect(g.members[i].removedNodes[g.node(Self.puppet)] == g.node(Self.puppet), "the equivocator is removed by its own evidence")
        }
        // The evidence checks from the two changes alone, in any order, at anyone.
        let evidence = try #require(g.members[Self.other].equivocations.first)
        #expect(EpochEquivocation.verify(evidence.first, evidence.second, session: g.genesis.sessionID))
        #expect(Set([evidence.first.hash, evidence.second.hash]) == Set([first.hash, twin.hash]))
        // The equivocator is on the head's roster still: its removal is re-issued, and everyone converges without both.
        _ = g.converge(among: [0, 1], now: 4)
        for i in [Self.honest, Self.other] {
            #expect(!(g.members[i].roster ?? []).contains(g.node(Self.puppet)) && !(g.members[i].roster ?? []).contains(g.node(Self.hostile)))
            #expect(g.members[i].current != nil && g.members[i].current == g.members[Self.honest].current)
        }
    }

    /// The same attack without equivocation: two honest removals of the hostile member, then its
    /// puppet signs lower-hash siblings of the hostile member's own change (epoch 1) that hand the
    /// hostile member the key again. They lose: the session stays where the removals took it.
    @Test func aSiblingOfAnOlderChangeNeverUndoesARemoval() throws {
        var g = EpochGroup(4, seed: 42)
        let first = try g.rekey(Self.hostile, now: 1)
        g.deliver([first], to: [0, 1, 3], now: 1)
        // Two honest members remove it at once.
        let removal = try g.remove(Self.honest, [Self.hostile], now: 2)
        let again = try g.remove(Self.other, [Self.hostile], now: 2)
        g.deliver([again], to: [0], now: 3)
        g.deliver([removal], to: [1], now: 3)
        #expect(g.members[Self.honest].epoch == 2 && g.members[Self.other].head == g.members[Self.honest].head)
        let head = g.members[Self.honest].head
        let lowest = [first.hash, removal.hash, again.hash].min(by: bytesPrecede) ?? head
        let parents = [g.genesis.head, first.hash]
        for round in 0..<6 {
            let parent = parents[round % parents.count]
            let atGenesis = parent == g.genesis.head
            let sibling = try Self.forged(&g, by: Self.puppet, parent: parent, epoch: atGenesis ? 1 : 2, roster: g.nodes) {
                bytesPrecede($0.hash, lowest)
            }
            for i in [Self.honest, Self.other] {
                let receipt = g.members[i].receive(sibling, now: Double(4 + round))
                #expect(receipt == .recorded || receipt == .refused(.epochEquivocation), "member \(i), round \(round): \(receipt)")
                #expect(g.members[i].head == head, "member \(i), round \(round): the session went back to epoch \(g.members[i].epoch)")
                #expect(g.members[i].removedNodes[g.node(Self.hostile)] != nil)
                #expect(!g.members[i].pendingRemovals.contains(g.node(Self.hostile)), "member \(i): the removal stands, nothing to re-issue")
            }
        }
    }

    /// A rekey with the roster {maker}, ground to the lowest hash, on the unknown roster of epoch 0
    /// and on a known one: every honest member refuses it, and stays able to remove the maker.
    @Test func aRosterOfTheMakerAloneLocksNobodyOut() throws {
        var g = EpochGroup(3, seed: 43)
        let capture = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: [g.node(Self.hostile)])
        for i in [Self.honest, Self.other] {
            #expect(g.members[i].receive(capture, now: 1) == .refused(.epochRosterOmitsMember), "member \(i) took a roster that leaves it out")
            #expect(g.members[i].current == g.genesis)
        }
        let first = try g.rekey(Self.honest, now: 2)
        g.deliver([first], to: [1, 2], now: 2)
        let again = try Self.forged(&g, by: Self.hostile, parent: first.hash, epoch: 2, roster: [g.node(Self.hostile)])
        // Leaving out one honest member is as bad as leaving out both.
        let partial = try Self.forged(&g, by: Self.hostile, parent: first.hash, epoch: 2, roster: [g.node(Self.honest), g.node(Self.hostile)])
        for i in [Self.honest, Self.other] {
            #expect(g.members[i].receive(again, now: 3) == .refused(.epochRosterOmitsMember))
            #expect(g.members[i].receive(partial, now: 3) == .refused(.epochRosterOmitsMember))
        }
        let removal = try g.remove(Self.other, [Self.hostile], now: 4)
        #expect(g.deliver([removal], to: [0], now: 4)[0] == .moved(g.members[Self.other].current!))
        // An explicit removal is how a roster leaves someone out: signed, and seen by everyone.
        let explicit = try Self.forged(&g, by: Self.honest, parent: removal.hash, epoch: 3, roster: [g.node(Self.honest)], removed: [g.node(Self.other)])
        #expect(g.members[Self.other].receive(explicit, now: 5) == .removed(by: g.node(Self.honest)))
    }

    /// Keys the hostile member plants on its roster, never run as members: the change waits for a
    /// proof that never comes, so they are handed nothing, then or after the hostile member is removed.
    @Test func plantedKeysAreHandedNothing() throws {
        var g = EpochGroup(3, seed: 44)
        let planted = (0..<3).map { Identity(seed: [UInt8](repeating: UInt8(200 + $0), count: 32)).publicKey }
        let forgery = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: g.nodes + planted)
        for i in [Self.honest, Self.other] {
            #expect(g.members[i].receive(forgery, now: 1) == .waiting, "member \(i) kept a roster with keys nobody proved")
            #expect(g.members[i].epoch == 0)
        }
        let removal = try g.remove(Self.honest, [Self.hostile], now: 2)
        #expect(g.deliver([removal], to: [1], now: 2)[1] == .moved(g.members[Self.honest].current!))
        let later = try g.rekey(Self.other, now: 3)
        g.deliver([later], to: [0], now: 3)
        for i in [Self.honest, Self.other] {
            #expect(planted.allSatisfy { !(g.members[i].roster ?? []).contains($0) }, "member \(i): a planted key is on the roster")
            #expect(g.members[i].head == later.hash)
        }
        // A node key proven later (it signed its member record) releases a waiting change.
        var fresh = EpochGroup(3, seed: 44)
        _ = fresh.members[Self.honest].receive(forgery, now: 1)
        let proof = fresh.members[Self.honest].prove(Set(fresh.nodes + planted), now: 2)
        #expect(proof == .moved(try #require(fresh.members[Self.honest].current)) && fresh.members[Self.honest].head == forgery.hash)
    }

    /// A key of a losing branch whose roster names a node key no winning roster does: refused,
    /// so a losing maker's roster cannot get anyone granted the current key.
    @Test func aLosingBranchsRosterAdmitsNobody() throws {
        var g = EpochGroup(4, seed: 45)
        // The hostile member's change (its puppet on the roster), which loses to the honest one.
        let honestChange = try g.rekey(Self.honest, now: 1, members: [g.node(0), g.node(1), g.node(2)])
        let losing = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: g.nodes) { bytesPrecede(honestChange.hash, $0.hash) }
        #expect(g.deliver([losing], to: [Self.other], now: 1)[Self.other] == .moved(try #require(losing.openKey(with: g.members[Self.other].identity))))
        _ = g.members[Self.other].receive(honestChange, now: 2)
        #expect(g.members[Self.other].head == honestChange.hash)
        #expect(g.members[Self.other].admission(of: g.node(Self.puppet), holding: losing.hash, now: 3) == .refused(.epochLosingBranch))
        #expect(g.members[Self.other].handover(to: g.node(Self.puppet), holding: losing.hash, now: 3, using: &g.rng) == nil)
        // An honest member that made or held the losing key is let in by the winning rosters.
        #expect(g.members[Self.other].admission(of: g.node(Self.honest), holding: losing.hash, now: 3) == .behind)
    }

    /// Evidence of an equivocation is checked from the two changes alone; nothing else passes.
    @Test func equivocationEvidenceIsCheckedByAnyone() throws {
        var g = EpochGroup(3, seed: 46)
        let a = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: g.nodes)
        let b = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: g.nodes)
        let session = g.genesis.sessionID
        #expect(EpochEquivocation.verify(a, b, session: session) && EpochEquivocation.verify(b, a, session: session))
        #expect(EpochEquivocation(a, b, session: session) == EpochEquivocation(b, a, session: session))
        #expect(!EpochEquivocation.verify(a, a, session: session), "one change is no equivocation")
        let other = try Self.forged(&g, by: Self.honest, parent: g.genesis.head, epoch: 1, roster: g.nodes)
        #expect(!EpochEquivocation.verify(a, other, session: session), "two makers")
        g.deliver([a], to: [0], now: 1)
        let onTop = try Self.forged(&g, by: Self.hostile, parent: a.hash, epoch: 2, roster: g.nodes)
        #expect(!EpochEquivocation.verify(a, onTop, session: session), "two parents")
        #expect(!EpochEquivocation.verify(a, b, session: [UInt8](repeating: 0, count: 8)), "another session")
        var forged = b
        forged.removed = [g.node(Self.honest)]
        forged.recipients.removeAll { $0.node == g.node(Self.honest) }
        #expect(!EpochEquivocation.verify(a, forged, session: session), "a signature that is not the maker's")
        // Every member that holds both changes excludes the maker, in either order.
        g.deliver([b], to: [0], now: 2)
        g.deliver([b, a], to: [1], now: 2)
        for i in [0, 1] { #expect(g.members[i].equivocators == [g.node(Self.hostile)] && g.members[i].head == g.members[0].head) }
        // A third change on the same parent adds nothing but its removals.
        let c = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: g.nodes)
        let kept = Set([a.hash, b.hash, c.hash].sorted(by: bytesPrecede).prefix(2))
        for i in [0, 1] {
            _ = g.members[i].receive(c, now: 3)
            #expect(Set(g.members[i].changes.filter { $0.parent == g.genesis.head }.map(\.hash)) == kept)
        }
    }

    /// The hostile member and its puppet race the honest removal: forks from random older epochs,
    /// rosters that put the hostile member back, twins, in random orders. Every honest member ends on
    /// one head and key, with the hostile member removed and on no roster.
    @Test(arguments: 1...10)
    func racingARemovalNeverUndoesIt(seed: UInt64) throws {
        var g = EpochGroup(5, seed: 100 + seed)
        var rng = SWIMRandom(seed: seed &* 31)
        let honest = [0, 1, 4]
        var made: [EpochChange] = []
        let start = try g.rekey(Self.hostile, now: 1)
        made.append(start)
        g.deliver([start], to: [0, 1, 3, 4], now: 1)
        let removal = try g.remove(honest[rng.index(3)], [Self.hostile], now: 2)
        made.append(removal)
        for step in 0..<8 {
            // The adversary forks from a random epoch it knows, putting the hostile member back.
            let known = made.filter { $0.epoch <= 2 }
            var parent = (hash: g.genesis.head, epoch: UInt64(0))
            if rng.index(3) != 0 {
                let c = known[rng.index(known.count)]
                parent = (c.hash, c.epoch)
            }
            let maker = rng.index(2) == 0 ? Self.hostile : Self.puppet
            if let change = try? Self.forged(&g, by: maker, parent: parent.hash, epoch: parent.epoch + 1, roster: g.nodes) { made.append(change) }
            if step % 3 == 0, let change = try? g.rekey(honest[rng.index(3)], now: Double(3 + step)) { made.append(change) }
        }
        for i in honest {
            var order = made
            for k in stride(from: order.count - 1, to: 0, by: -1) { order.swapAt(k, rng.index(k + 1)) }
            for c in order { _ = g.members[i].receive(c, now: 20) }
        }
        _ = g.converge(among: honest, now: 21)
        let reference = g.members[honest[0]]
        for i in honest {
            #expect(g.members[i].removedNodes[g.node(Self.hostile)] != nil, "seed \(seed): member \(i) forgot the removal")
            #expect(g.members[i].chain.contains(removal.hash), "seed \(seed): member \(i): a sibling of an older change outran the removal")
            #expect(g.members[i].head == reference.head && g.members[i].current != nil && g.members[i].current == reference.current, "seed \(seed): member \(i)")
            #expect(!(g.members[i].roster ?? []).contains(g.node(Self.hostile)), "seed \(seed): member \(i): the removed key is on the roster")
            #expect(g.members[i].admission(of: g.node(Self.hostile), holding: g.genesis.head, now: 22) == .refused(.removedNode))
        }
    }

    /// A member making changes as fast as it can: every member keeps at most `changesPerMaker` of
    /// its changes per `changeWindow`; the rest wait, and go on once the window has room. The
    /// member itself makes no more until then.
    @Test func changesAreRateLimitedPerMaker() throws {
        var settings = EpochSettings()
        settings.changesPerMaker = 3
        settings.changeWindow = 60
        var g = EpochGroup(3, seed: 47, settings: settings, rateLimited: true)
        let spammer = g.members[Self.hostile]
        var made: [EpochChange] = []
        for t in 0..<6 {
            // Its own history without the limit (a hostile member does not check itself).
            var unlimited = EpochHistory(key: g.genesis, identity: spammer.identity, local: spammer.local)
            for c in made { _ = unlimited.receive(c, now: Double(t)) }
            _ = unlimited.prove(Set(g.nodes), now: Double(t))
            made.append(try unlimited.rekey(members: g.nodes, now: Double(t), using: &g.rng))
        }
        for c in made { _ = g.members[Self.honest].receive(c, now: 10) }
        #expect(g.members[Self.honest].epoch == 3, "only three of its changes within the window")
        #expect(g.members[Self.honest].waiting.count == 3)
        #expect(g.members[Self.honest].prove(Set(g.nodes), now: 40) == .recorded, "still within the window")
        #expect(g.members[Self.honest].epoch == 3)
        _ = g.members[Self.honest].prove(Set(g.nodes), now: 71)
        #expect(g.members[Self.honest].epoch == 6, "the window has room again: the rest go on")
        // An honest member stops itself at the limit.
        for t in 0..<3 { _ = try g.rekey(Self.other, now: Double(100 + t)) }
        #expect(throws: EpochError.rateLimited(until: 160)) { try g.rekey(Self.other, now: 103) }
    }
}
