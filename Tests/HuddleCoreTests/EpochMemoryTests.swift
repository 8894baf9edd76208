import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 37: what a member keeps of its epoch history across a restart (`EpochMemory`) gives it the
/// same head, keys and removed node keys after it, fork and equivocation included, and survives a
/// round trip through its stored form (`ResumePoint`).
@Suite struct EpochMemoryTests {
    /// A fresh history of member `i` (what a restart starts from: its key file's key, here genesis).
    private func restarted(_ g: EpochGroup, _ i: Int) -> EpochHistory {
        EpochHistory(key: g.genesis, identity: g.members[i].identity, local: g.members[i].local, settings: g.members[i].settings)
    }

    private func roundTrip(_ memory: EpochMemory) throws -> EpochMemory {
        let point = ResumePoint(member: MemberID(raw: 1), incarnation: 3, ownSeq: 4, counter: 5, delivered: [:], baseline: [:],
                                nonApplication: [:], addresses: ["127.0.0.1:1"], epochs: memory)
        return try #require(try ResumePoint.decode(point.encoded()).epochs)
    }

    @Test func aRecalledHistoryHasTheSameHeadKeysAndRemovals() throws {
        var g = EpochGroup(5, seed: 37)
        let first = try g.rekey(0, now: 1)
        g.deliver([first], to: [1, 2, 3, 4], now: 1)
        let removal = try g.remove(1, [3], now: 2)
        g.deliver([removal], to: [0, 2, 4], now: 2)
        // An equivocation by member 4: two changes on one parent.
        var twin = g.members[4]
        let a = try g.rekey(4, now: 3)
        let b = try twin.rekey(members: g.nodes, now: 3, using: &g.rng)
        g.deliver([a, b], to: [0, 1, 2], now: 4)
        let before = g.members[2]
        #expect(before.removedNodes[g.node(3)] != nil && before.equivocators == [g.node(4)], "the scenario has a removal and an equivocator")

        let memory = try roundTrip(try #require(before.memory))
        var after = restarted(g, 2)
        after.recall(memory, now: 0)
        #expect(after.head == before.head && after.epoch == before.epoch)
        #expect(after.current == before.current, "it holds the current key again")
        #expect(after.removedNodes == before.removedNodes)
        #expect(after.equivocators == before.equivocators)
        #expect(after.admission(of: g.node(3), holding: g.genesis.head, now: 1) == .refused(.removedNode), "a removed key holder stays out")

        // Without the memory (what a restart did before): the removal is forgotten.
        #expect(restarted(g, 2).removedNodes[g.node(3)] == nil)
    }

    @Test func removalsOfForgottenChangesAreRemembered() throws {
        var g = EpochGroup(3, seed: 38)
        let removal = try g.remove(0, [2], now: 1)
        g.deliver([removal], to: [1], now: 1)
        var memory = try #require(g.members[1].memory)
        // Keep only a removal remembered beyond the changes (as after the changes were forgotten).
        memory.changes = []
        memory.removals = [.init(node: g.node(2), by: g.node(0))]
        var after = restarted(g, 1)
        after.recall(try roundTrip(memory), now: 0)
        #expect(after.removedNodes[g.node(2)] == g.node(0))
    }

    @Test func aMemoryOfAnotherSessionIsIgnored() throws {
        var g = EpochGroup(2, seed: 39)
        let change = try g.rekey(0, now: 1)
        g.deliver([change], to: [1], now: 1)
        let memory = try #require(g.members[1].memory)
        let other = EpochGroup(2, seed: 40)
        var history = EpochHistory(key: other.genesis, identity: g.members[1].identity, local: g.members[1].local)
        history.recall(memory, now: 0)
        #expect(history.head == other.genesis.head)
    }

    @Test func everyTruncationOfAStoredPointIsAnError() throws {
        var g = EpochGroup(3, seed: 41)
        let change = try g.remove(0, [2], now: 1)
        g.deliver([change], to: [1], now: 1)
        let point = ResumePoint(member: MemberID(raw: 9), incarnation: 1, ownSeq: 2, counter: 3, delivered: [MemberID(raw: 9): 2],
                                baseline: [:], nonApplication: [:], addresses: [], epochs: g.members[1].memory)
        let bytes = point.encoded()
        #expect(try ResumePoint.decode(bytes) == point)
        for n in 0..<bytes.count { #expect(throws: CoreError.self) { try ResumePoint.decode(Array(bytes.prefix(n))) } }
        #expect(throws: CoreError.self) { try ResumePoint.decode(bytes + [0]) }
    }
}
