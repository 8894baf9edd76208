import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 33: the epoch history against a hostile member that holds the key — it equivocates,
/// signs siblings of older changes through a puppet and races removals (see the note at the top of
/// EpochHistory.swift). Members 0 and 1 are honest, 2 is the hostile member, 3 its puppet (a node
/// key it runs as a member, on the rosters like any other).
@Suite struct EpochAdversaryTests {
    static let honest = 0, other = 1, hostile = 2, puppet = 3

    /// A change by `maker` on `parent` with exactly `roster` (and `removed`), ground until `accept` holds.
    static func forged(_ g: inout EpochGroup, by maker: Int, parent: [UInt8], epoch: UInt64, roster: [[UInt8]], removed: [[UInt8]] = [],
                       until accept: (EpochChange) -> Bool = { _ in true }) throws -> EpochChange {
        for _ in 0..<400 {
            let change = try EpochChange.make(session: g.genesis.sessionID, epoch: epoch, parent: parent, maker: MemberID(raw: UInt64(maker + 1)),
                                              identity: g.members[maker].identity, removed: removed, roster: roster,
                                              key: randomBytes(32, &g.rng), sealSeed: randomBytes(32, &g.rng))
            if accept(change) { return change }
        }
        throw CoreError.cannotSeal
    }

    /// The confirmed attack: the puppet made epoch 1, an honest member removed the hostile member on
    /// top of it, then the puppet signs a lower-hash sibling of its own change with the hostile
    /// member back on the roster. The removal stays, the puppet is proven to equivocate (evidence
    /// anyone checks from the two changes alone) and removed, and the session never goes back to
    /// epoch 1. Before: the lower sibling replaced the puppet's change, the removal went with its
    /// subtree, and the removed key was on the head's roster again.
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
            #expect(g.members[i].head == removal.hash, "member \(i): the session went back to epoch \(g.members[i].epoch)")
            #expect(g.members[i].equivocators == [g.node(Self.puppet)])
            #expect(g.members[i].removedNodes[g.node(Self.puppet)] == g.node(Self.puppet), "the equivocator is removed by its own evidence")
            #expect(g.members[i].admission(of: g.node(Self.puppet), holding: g.genesis.head, now: 3) == .refused(.removedNode))
        }
        let evidence = try #require(g.members[Self.other].equivocations.first)
        #expect(EpochEquivocation.verify(evidence.first, evidence.second, session: g.genesis.sessionID))
        #expect(EpochEquivocation.verify(evidence.second, evidence.first, session: g.genesis.sessionID))
        #expect(Set([evidence.first.hash, evidence.second.hash]) == Set([first.hash, twin.hash]))
        // Not evidence: one change twice, two makers, two parents, or another session.
        #expect(!EpochEquivocation.verify(first, first, session: g.genesis.sessionID))
        #expect(!EpochEquivocation.verify(first, removal, session: g.genesis.sessionID))
        #expect(!EpochEquivocation.verify(first, twin, session: [UInt8](repeating: 9, count: g.genesis.sessionID.count)))
        // The puppet is on the head's roster: its removal is re-issued, and the honest members converge without both.
        _ = g.converge(among: [0, 1], now: 4)
        for i in [Self.honest, Self.other] {
            let roster = g.members[i].roster ?? []
            #expect(!roster.contains(g.node(Self.puppet)) && !roster.contains(g.node(Self.hostile)))
            #expect(g.members[i].current != nil && g.members[i].current == g.members[Self.honest].current)
            #expect(g.members[i].epoch == 3)
        }
    }

    /// The same attack without equivocation: two honest members remove the hostile member at once
    /// (on its own epoch 1), then its puppet signs lower-hash siblings of the hostile member's change
    /// and of the removals, each handing the hostile member the key again. None wins: the session
    /// stays where the removals took it, and nothing is left to re-issue.
    @Test func aSiblingOfAnOlderChangeNeverUndoesARemoval() throws {
        var g = EpochGroup(4, seed: 42)
        let first = try g.rekey(Self.hostile, now: 1)
        g.deliver([first], to: [0, 1, 3], now: 1)
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
                #expect(g.members[i].head == head, "member \(i), round \(round): the session went to epoch \(g.members[i].epoch)")
                #expect(g.members[i].removedNodes[g.node(Self.hostile)] != nil)
                #expect(!g.members[i].pendingRemovals.contains(g.node(Self.hostile)), "member \(i): the removal stands, nothing to re-issue")
            }
        }
    }

    /// An equivocator's third change, lower than both kept, replaces the higher one with its whole
    /// subtree — honest descendants and their removals included. The removals stay.
    @Test func aDroppedSubtreeKeepsItsRemovals() throws {
        var g = EpochGroup(4, seed: 43)
        let first = try g.rekey(Self.puppet, now: 1)
        g.deliver([first], to: [0, 1], now: 1)
        let removal = try g.remove(Self.honest, [Self.hostile], now: 2)
        g.deliver([removal], to: [1], now: 2)
        #expect(g.members[Self.other].head == removal.hash)
        // Two more siblings of the puppet's change, each lower than it: the second drops `first`'s subtree.
        let low = try Self.forged(&g, by: Self.puppet, parent: g.genesis.head, epoch: 1, roster: g.nodes) { bytesPrecede($0.hash, first.hash) }
        let lower = try Self.forged(&g, by: Self.puppet, parent: g.genesis.head, epoch: 1, roster: g.nodes) { bytesPrecede($0.hash, low.hash) }
        for i in [Self.honest, Self.other] {
            _ = g.members[i].receive(low, now: 3)
            _ = g.members[i].receive(lower, now: 3)
            #expect(!g.members[i].changes.contains(removal), "member \(i): the removal's change was dropped with the puppet's")
            #expect(g.members[i].removedNodes[g.node(Self.hostile)] == g.node(Self.honest), "member \(i): the removal went with its change")
            #expect(g.members[i].admission(of: g.node(Self.hostile), holding: g.genesis.head, now: 3) == .refused(.removedNode))
            #expect(g.members[i].pendingRemovals.contains(g.node(Self.hostile)), "member \(i): the removal is re-issued on the new head")
        }
        // The re-issue takes both the removed member and the equivocator off the roster.
        _ = g.converge(among: [0, 1], now: 4)
        for i in [Self.honest, Self.other] {
            let roster = g.members[i].roster ?? []
            #expect(!roster.contains(g.node(Self.hostile)) && !roster.contains(g.node(Self.puppet)))
            #expect(g.members[i].current != nil && g.members[i].current == g.members[Self.honest].current)
        }
    }

    /// Whatever order the changes of an equivocation race arrive in, members holding the same
    /// changes choose the same head and the same removed node keys.
    @Test(arguments: 1...6)
    func equivocationsConvergeInEveryOrder(seed: UInt64) throws {
        var g = EpochGroup(4, seed: 50 + seed)
        let first = try g.rekey(Self.puppet, now: 1)
        let removal = try g.remove(Self.honest, [Self.hostile], now: 1)
        let twin = try Self.forged(&g, by: Self.puppet, parent: g.genesis.head, epoch: 1, roster: g.nodes)
        let onTwin = try Self.forged(&g, by: Self.other, parent: twin.hash, epoch: 2, roster: g.nodes)
        let all = [first, removal, twin, onTwin]
        var rng = SWIMRandom(seed: seed)
        var heads: Set<[UInt8]> = []
        var removed: Set<Set<[UInt8]>> = []
        for _ in 0..<8 {
            var fresh = EpochHistory(key: g.genesis, identity: g.members[Self.other].identity, local: g.members[Self.other].local)
            for change in all.shuffled(using: &rng) { _ = fresh.receive(change, now: 2) }
            heads.insert(fresh.head)
            removed.insert(Set(fresh.removedNodes.keys))
        }
        #expect(heads.count == 1 && removed.count == 1, "orders disagree: \(heads.count) heads, \(removed.count) removed sets")
        #expect(removed.first == Set([g.node(Self.hostile), g.node(Self.puppet)]))
        // The honest removal wins over the puppet's changes: it is not excluded and undoes nothing.
        #expect(heads.first == removal.hash)
    }

    /// The confirmed capture: a rekey with the roster {maker}, ground to a low hash. Every honest
    /// member follows it without its key (nobody but the maker holds it, so nobody can grant it),
    /// and is locked out; after the re-issue delay one of them removes the maker on the epoch
    /// before (a sibling of the capture, which the fork choice then excludes), and every honest
    /// member moves there with the new key, able to rekey and remove again. Before: every honest
    /// member stayed on the captured epoch for good (`remove` and `rekey` failed with `not_member`).
    @Test func aRosterOfTheMakerAloneLocksNobodyOut() throws {
        var g = EpochGroup(3, seed: 44)
        let capture = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: [g.node(Self.hostile)])
        for i in [Self.honest, Self.other] {
            #expect(g.members[i].receive(capture, now: 1) == .notHanded)
            #expect(g.members[i].lockout?.maker == g.node(Self.hostile), "member \(i) is not seen as locked out")
            #expect(g.members[i].counterDeadline == 1 + g.members[i].settings.reissueDelay)
            #expect(g.members[i].counter(members: g.view(i), now: 2, using: &g.rng) == nil, "not before the delay")
        }
        let counter = try #require(g.members[Self.honest].counter(members: g.view(Self.honest), now: 31, using: &g.rng))
        #expect(counter.parent == g.genesis.head && counter.removed == [g.node(Self.hostile)] && !counter.roster.contains(g.node(Self.hostile)))
        #expect(g.members[Self.honest].head == counter.hash && g.members[Self.honest].current != nil)
        let key = try #require(g.members[Self.honest].current)
        #expect(g.deliver([counter], to: [Self.other, Self.hostile], now: 31) == [Self.other: .moved(key), Self.hostile: .removed(by: g.node(Self.honest))])
        #expect(g.members[Self.other].counterDeadline == nil && g.members[Self.other].lockout == nil)
        // Both honest members make changes again.
        let rekey = try g.rekey(Self.other, now: 32)
        #expect(g.deliver([rekey], to: [Self.honest], now: 32)[Self.honest] == .moved(try #require(g.members[Self.other].current)))

        // On a known roster: leaving out one honest member is as bad as leaving out both. The member
        // left out counts itself first (the only one left out): it counters at once after the delay.
        var h = EpochGroup(3, seed: 45)
        let first = try h.rekey(Self.honest, now: 1)
        h.deliver([first], to: [1, 2], now: 1)
        let partial = try Self.forged(&h, by: Self.hostile, parent: first.hash, epoch: 2, roster: [h.node(Self.honest), h.node(Self.hostile)])
        h.deliver([partial], to: [0, 1], now: 2)
        #expect(h.members[Self.honest].lockout == nil, "member 0 is on the roster: it holds the key")
        #expect(h.members[Self.other].lockout?.parent == first.hash && h.members[Self.other].counterDeadline == 2 + 30)
        // Its own `remove` works at once: made on the epoch before, as a sibling that wins.
        let removal = try h.remove(Self.other, [Self.hostile], now: 3)
        #expect(removal.parent == first.hash)
        let key2 = try #require(h.members[Self.other].current)
        #expect(h.deliver([removal], to: [Self.honest], now: 3)[Self.honest] == .moved(key2))
        #expect(h.members[Self.honest].head == removal.hash && h.members[Self.honest].removedNodes[h.node(Self.hostile)] != nil)
    }

    /// An honest maker leaves out only a member it has not seen for the grace, and grants it the
    /// key when it links: the member left out, granted, makes no counter-change.
    @Test func aMemberLeftOutAndGrantedMakesNoCounterChange() throws {
        var g = EpochGroup(3, seed: 46)
        let first = try g.rekey(Self.honest, now: 1)
        g.deliver([first], to: [1, 2], now: 1)
        let later = 1 + g.members[Self.honest].settings.grace + 10
        let change = try g.rekey(Self.honest, now: later, members: [g.node(Self.honest), g.node(Self.other)])
        #expect(!change.roster.contains(g.node(2)), "member 2, not seen for the grace, is left out")
        #expect(g.members[2].receive(change, now: later) == .notHanded)
        #expect(g.members[2].lockout?.parent == first.hash && g.members[2].counterDeadline == later + 30)
        let handover = try #require(g.members[Self.honest].handover(to: g.node(2), holding: first.hash, now: later + 1, using: &g.rng))
        #expect(handover.grant != nil)
        #expect(g.members[2].receive(handover, now: later + 1) == .moved(try #require(g.members[Self.honest].current)))
        #expect(g.members[2].counterDeadline == nil)
        #expect(g.members[2].counter(members: g.view(2), now: later + 100, using: &g.rng) == nil)
    }

    /// Keys the hostile member planted on its roster, run by no node (no member record, never
    /// linked): the honest change that removes it carries none of them, so they are handed no key
    /// made after its removal. Before: every roster entry counted as seen when the change was taken,
    /// and honest changes carried the planted keys for the grace (7 days).
    @Test func plantedKeysGoWithTheirPlantersRemoval() throws {
        var g = EpochGroup(3, seed: 47)
        let planted = (0..<3).map { Identity(seed: [UInt8](repeating: UInt8(200 + $0), count: 32)).publicKey }
        let forgery = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: g.nodes + planted)
        for i in [Self.honest, Self.other] { #expect(g.members[i].receive(forgery, now: 1) != .notHanded) }
        let removal = try g.remove(Self.honest, [Self.hostile], now: 2)
        #expect(planted.allSatisfy { !removal.roster.contains($0) }, "a planted key is handed the key made after the removal")
        #expect(removal.roster.contains(g.node(Self.other)))
        g.deliver([removal], to: [Self.other], now: 2)
        let later = try g.rekey(Self.other, now: 3)
        #expect(planted.allSatisfy { !later.roster.contains($0) })
    }

    /// Two colluding members each capture epoch 1 with a roster of themselves alone, both ground
    /// below the honest counter-change. The locked-out member counters the first capture; the
    /// second then wins, and it counters that one on top of its own counter-change (one change per
    /// parent and maker: a second sibling would prove it equivocates). That branch removes both
    /// makers, both captures are excluded, and both honest members end on it with its key. Before:
    /// its second counter-change was a sibling of its first, and it was proven an equivocator and
    /// removed by its own changes. A counter-change that loses is not tried again at once.
    @Test func aSecondCaptureIsCounteredOnTopOfTheFirstCounterChange() throws {
        var g = EpochGroup(4, seed: 48)
        let low: (EpochChange) -> Bool = { $0.hash[0] < 4 }
        let first = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: [g.node(Self.hostile)], until: low)
        let second = try Self.forged(&g, by: Self.puppet, parent: g.genesis.head, epoch: 1, roster: [g.node(Self.puppet)], until: low)
        let (lower, higher) = bytesPrecede(first.hash, second.hash) ? (first, second) : (second, first)
        for i in [Self.honest, Self.other] {
            g.deliver([higher], to: [i], now: 1)
            g.deliver([lower], to: [i], now: 1)
            #expect(g.members[i].head == lower.hash && g.members[i].lockout?.maker == lower.makerNodeKey)
        }
        // The first counter-change removes the lower capture's maker and loses to the higher capture.
        let counter = try #require(g.members[Self.honest].counter(members: g.view(Self.honest), now: 31, using: &g.rng))
        #expect(counter.parent == g.genesis.head && counter.removed == [lower.makerNodeKey])
        #expect(bytesPrecede(higher.hash, counter.hash), "seed: the counter-change must hash above the captures")
        #expect(g.members[Self.honest].head == higher.hash && g.members[Self.honest].lockout?.maker == higher.makerNodeKey)
        let retry = try #require(g.members[Self.honest].counterDeadline)
        #expect(retry >= 31 + 30, "not tried again at once (\(retry))")
        #expect(g.members[Self.honest].counter(members: g.view(Self.honest), now: 32, using: &g.rng) == nil)
        // After the delay it removes the second maker on top of its own counter-change.
        let again = try #require(g.members[Self.honest].counter(members: g.view(Self.honest), now: 61, using: &g.rng))
        #expect(again.parent == counter.hash && again.removed == [higher.makerNodeKey])
        #expect(g.members[Self.honest].equivocators.isEmpty && !g.members[Self.honest].isRemoved)
        #expect(g.members[Self.honest].head == again.hash && g.members[Self.honest].current != nil)
        let key = try #require(g.members[Self.honest].current)
        g.deliver([counter], to: [Self.other], now: 61)
        #expect(g.deliver([again], to: [Self.other], now: 61)[Self.other] == .moved(key))
        for i in [Self.honest, Self.other] {
            #expect(g.members[i].removedNodes[g.node(Self.hostile)] != nil && g.members[i].removedNodes[g.node(Self.puppet)] != nil)
        }
    }

    /// Remembered removals are bounded; an equivocator's go first, so the changes an equivocator
    /// floods in (each dropped with its removals remembered) do not flush an honest removal out.
    @Test func anEquivocatorsDroppedRemovalsDoNotFlushHonestOnes() throws {
        var settings = EpochSettings()
        settings.maxRemembered = 4
        var g = EpochGroup(3, seed: 50, settings: settings)
        let a = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: g.nodes)
        let b = try Self.forged(&g, by: Self.hostile, parent: g.genesis.head, epoch: 1, roster: g.nodes)
        g.deliver([a, b], to: [Self.honest], now: 1)
        let honestRemoval = Identity(seed: [UInt8](repeating: 77, count: 32)).publicKey
        g.members[Self.honest].rememberedRemovals = [(honestRemoval, g.node(Self.other))]
        for n in 0..<8 {
            g.members[Self.honest].rememberedRemovals.append((Identity(seed: [UInt8](repeating: UInt8(100 + n), count: 32)).publicKey, g.node(Self.hostile)))
        }
        g.members[Self.honest].trimRememberedRemovals()
        #expect(g.members[Self.honest].rememberedRemovals.count == 4)
        #expect(g.members[Self.honest].rememberedRemovals.first?.node == honestRemoval, "the honest removal is kept")
    }
}

/// A hostile member's own rosters stop letting anyone in once it is removed. It makes epoch 1
/// with a puppet key on the roster (a node key it runs, named by no honest member) beside the
/// honest ones; an honest member removes it on top. The puppet, linking with epoch 1's key, is
/// refused, so it is never granted the key made after the removal. Before: epoch 1's roster
/// admitted it as `behind`, and the hand-over sealed it the current key. An honest member that
/// holds epoch 1's key is still let in (it is on the roster of the removal).
@Test func aRemovedMakersRosterLetsNobodyIn() throws {
    var g = EpochGroup(3, seed: 63)
    let puppet = Identity(seed: [UInt8](repeating: 99, count: 32)).publicKey
    let planted = try EpochAdversaryTests.forged(&g, by: EpochAdversaryTests.hostile, parent: g.genesis.head, epoch: 1, roster: g.nodes + [puppet])
    g.deliver([planted], to: [0, 1], now: 1)
    #expect(g.members[0].admission(of: puppet, holding: planted.hash, now: 2) == .current || g.members[0].head == planted.hash)
    let removal = try g.remove(0, [EpochAdversaryTests.hostile], now: 3)
    #expect(!removal.roster.contains(puppet))
    #expect(g.members[0].admission(of: puppet, holding: planted.hash, now: 4) == .refused(.notOnRoster))
    #expect(g.members[0].handover(to: puppet, holding: planted.hash, now: 4, using: &g.rng) == nil)
    #expect(g.members[0].admission(of: g.node(1), holding: planted.hash, now: 4) == .behind, "an honest member on the removed maker's roster")
}

/// The review's findings on vouches and rosters (issue 33): a puppet that linked while its maker
/// was still a member is vouched for, but a removal after that epoch ends the vouch (the removal's
/// roster is what its maker decided), so the puppet is not granted the key made after it; and a
/// removed maker's roster still lets in the members it carried from the epoch before (on the
/// parent's roster), not the keys it put there.
@Test func aVouchEndsAtARemovalAndARemovedMakersRosterKeepsWhomItCarried() throws {
    var g = EpochGroup(4, seed: 64)
    let puppet = Identity(seed: [UInt8](repeating: 98, count: 32)).publicKey
    // Epoch 1 by an honest member (1), all four on it.
    let first = try g.rekey(1, now: 1)
    g.deliver([first], to: [0, 2, 3], now: 1)
    // Epoch 2 by the hostile member (2): everyone carried, and its puppet added.
    let second = try EpochAdversaryTests.forged(&g, by: 2, parent: first.hash, epoch: 2, roster: g.nodes + [puppet])
    g.deliver([second], to: [0, 1, 3], now: 2)
    // The puppet links to member 0 with epoch 2's key while it is the head: vouched.
    g.members[0].vouch(puppet, holding: second.hash)
    #expect(g.members[0].admission(of: puppet, holding: second.hash, now: 3) == .current)
    // Member 0 removes the hostile member, leaving member 3 (never seen here) off the removal's roster.
    let later = 4.0
    let removal = try g.remove(0, [2], now: later, members: [g.node(1)])
    #expect(!removal.roster.contains(puppet) && !removal.roster.contains(g.node(3)))
    #expect(g.members[0].admission(of: puppet, holding: second.hash, now: later + 1) == .refused(.notOnRoster), "vouch across a removal")
    #expect(g.members[0].handover(to: puppet, holding: second.hash, now: later + 1, using: &g.rng) == nil)
    // Member 3 was on epoch 1's roster (an honest maker's), carried by the removed maker: let in.
    #expect(g.members[0].admission(of: g.node(3), holding: second.hash, now: later + 1) == .behind)
    let handover = try #require(g.members[0].handover(to: g.node(3), holding: second.hash, now: later + 1, using: &g.rng))
    #expect(handover.grant != nil, "granted the key its removal's roster left it off")
}
