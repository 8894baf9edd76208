import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 33, the open findings of the last review: delayed-change slots budgeted per maker, and
/// cut-offs that survive a restart.
@Suite struct EpochFindingsTests {
    /// A change by member `i` on epoch 0, signed at `madeAt` (ms), handing a fresh key to everyone.
    static func onGenesis(_ g: inout EpochGroup, by i: Int, madeAt: UInt64) throws -> EpochChange {
        try EpochChange.make(session: g.genesis.sessionID, epoch: 1, parent: g.genesis.head, maker: MemberID(raw: UInt64(i + 1)),
                             identity: g.members[i].identity, madeAt: madeAt, removed: [], roster: g.nodes,
                             key: randomBytes(32, &g.rng), sealSeed: randomBytes(32, &g.rng))
    }

    /// Member 1's clock is 10 s ahead: its change waits at member 0 until its signed time. Member 2
    /// floods 40 near-future siblings (each released before member 1's). Member 2 holds at most
    /// `changeBurst` + 1 slots, member 1's change stays and counts when due (member 2's siblings
    /// prove it equivocates, so they lose). Before: the list kept the 32 earliest releases, and
    /// member 1's change was dropped.
    @Test func aFloodOfNearFutureSiblingsNeverPushesOutAnHonestDelayedChange() throws {
        var g = EpochGroup(3, seed: 40)
        let honest = try Self.onGenesis(&g, by: 1, madeAt: 1_010_000)
        #expect(g.members[0].receive(honest, now: 1_000) == .waiting)
        for k in 0..<40 {
            let flood = try Self.onGenesis(&g, by: 2, madeAt: 1_005_000 + UInt64(k))
            #expect(g.members[0].receive(flood, now: 1_000) == .waiting)
        }
        let held = g.members[0].delayed.filter { $0.change.makerNodeKey == g.node(2) }.count
        #expect(held <= g.members[0].settings.changeBurst + 1, "the flooding maker holds \(held) slots")
        #expect(g.members[0].delayed.contains { $0.hash == honest.hash }, "the honest change still waits")
        _ = g.members[0].releaseDelayed(now: 1_005)
        _ = g.members[0].releaseDelayed(now: 1_010)
        #expect(g.members[0].head == honest.hash, "the honest change counted when due")
        #expect(g.members[0].equivocators.contains(g.node(2)))
    }

    /// A removal's cut-off outlives the change (forgotten past `maxChanges`) and a restart: the
    /// memory keeps the remembered cut-offs. Before: a restarted member had only those of the
    /// changes it recalled, and delivered the removed member's later broadcasts again.
    @Test func aForgottenRemovalsCutoffSurvivesARestart() throws {
        var settings = EpochSettings()
        settings.maxChanges = 2
        var g = EpochGroup(3, seed: 41, settings: settings)
        let origin = MemberID(raw: 0x33)
        let removal = try g.members[0].remove([g.node(2)], members: g.nodes, origins: [EpochChange.Cutoff(origin: origin, node: g.node(2), seq: 7)],
                                              now: 1, using: &g.rng)
        #expect(removal.cutoffs.count == 1)
        for now in [2.0, 5, 8] { _ = try g.rekey(0, now: now, members: [g.node(1)]) }
        #expect(g.members[0].changes.allSatisfy { $0.hash != removal.hash }, "the removal is forgotten")
        #expect(g.members[0].cutoff(of: origin, node: g.node(2)) == 7)
        let memory = try #require(g.members[0].memory)
        let stored = try EpochMemory.decode(memory.encoded())
        #expect(stored.cutoffs == [EpochChange.Cutoff(origin: origin, node: g.node(2), seq: 7)])
        var restarted = EpochHistory(key: g.genesis, identity: g.members[0].identity, local: MemberID(raw: 1), settings: settings)
        restarted.recall(stored, now: 9)
        #expect(restarted.head == g.members[0].head)
        #expect(restarted.cutoff(of: origin, node: g.node(2)) == 7, "the cut-off survived the restart")
        #expect(restarted.isRemoved == false && restarted.removedNodes[g.node(2)] != nil)
    }
}
