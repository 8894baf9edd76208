import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 33: admins are the session's signed state. Member 0 is the admin the key was made with
/// (`EpochGroup(admins:)`); every change carries the admin set of the epoch it makes, and is
/// checked against the admin set of its parent.
@Suite struct EpochAdminTests {
    /// A change signed by member `i` on `parent` (epoch `epoch`) with `admins`, made by hand: what a
    /// hostile member sends with our own code.
    static func forged(_ g: inout EpochGroup, by i: Int, epoch: UInt64 = 1, parent: [UInt8]? = nil, admins: [[UInt8]],
                       removed: [[UInt8]] = [], madeAt: UInt64 = 0) throws -> EpochChange {
        try EpochChange.make(session: g.genesis.sessionID, epoch: epoch, parent: parent ?? g.genesis.head, maker: MemberID(raw: UInt64(i + 1)),
                             identity: g.members[i].identity, madeAt: madeAt, removed: removed,
                             roster: g.nodes.filter { !removed.contains($0) }, admins: admins,
                             key: randomBytes(32, &g.rng), sealSeed: randomBytes(32, &g.rng))
    }

    @Test func anAdminChangesTheAdminSetEverywhereAndTheNewKeyIsBoundToIt() throws {
        var g = EpochGroup(3, seed: 30, admins: [0])
        #expect(g.members.allSatisfy { $0.admins == [g.node(0)] })
        let change = try g.members[0].changeAdmins(to: [g.node(0), g.node(1)], members: g.nodes, now: 1, using: &g.rng)
        #expect(change.admins == sortedUnique([g.node(0), g.node(1)]))
        #expect(try EpochChange.decode(change.encoded()) == change, "version 3 round-trips")
        #expect(change.encoded()[0] == 3)
        g.deliver([change], to: [1, 2], now: 1)
        for i in 0..<3 {
            #expect(g.members[i].admins == change.admins && g.members[i].current?.admins == change.admins)
        }
        // Member 1 is an admin now; member 2 still is not.
        let byOne = try g.rekey(1, now: 2)
        #expect(g.deliver([byOne], to: [0, 2], now: 2)[0] == .moved(g.members[1].current!))
        #expect(byOne.admins == change.admins, "a rekey carries the admin set on")
        #expect(throws: CoreError.notAdmin) { try g.rekey(2, now: 3) }
    }

    @Test func aNonAdminsAdminChangeIsRefusedAndNoSessionGetsOrLosesAllItsAdmins() throws {
        var g = EpochGroup(3, seed: 31, admins: [0])
        // Member 2 names itself admin: refused everywhere, whatever set it signs.
        for admins in [[g.node(2)], [g.node(0), g.node(2)], [g.node(0)]] {
            let grab = try Self.forged(&g, by: 2, admins: admins)
            #expect(g.members[0].receive(grab, now: 1) == .refused(.epochNotAdmin))
            #expect(g.members[1].receive(grab, now: 1) == .refused(.epochNotAdmin))
        }
        // The admin cannot leave the session without admins (its own node refuses, and a change
        // signed by hand that carries none, a version 2, is refused everywhere).
        #expect(throws: CoreError.adminsUnchangeable) { try g.members[0].changeAdmins(to: [], members: g.nodes, now: 1, using: &g.rng) }
        // Nor hand it to node keys that are no members (a typo): nobody could make a change again.
        #expect(throws: CoreError.adminsUnchangeable) {
            try g.members[0].changeAdmins(to: [[UInt8](repeating: 7, count: 32)], members: g.nodes, now: 1, using: &g.rng)
        }
        let none = try Self.forged(&g, by: 0, admins: [])
        #expect(none.encoded()[0] == 2)
        #expect(g.members[1].receive(none, now: 1) == .refused(.epochAdminsChanged))
        // A session made without admins never gets any: not by its members' nodes, not by hand.
        var open = EpochGroup(3, seed: 32)
        #expect(throws: CoreError.adminsUnchangeable) { try open.members[0].changeAdmins(to: [open.node(0)], members: open.nodes, now: 1, using: &open.rng) }
        let capture = try Self.forged(&open, by: 2, admins: [open.node(2)])
        #expect(open.members[0].receive(capture, now: 1) == .refused(.epochAdminsChanged))
        #expect(open.members[0].admins.isEmpty && open.members[0].epoch == 0)
        // Without admins, every member still removes and rekeys (today's behaviour).
        let removal = try open.remove(1, [2], now: 2)
        #expect(open.deliver([removal], to: [0], now: 2)[0] == .moved(open.members[1].current!))
    }

    @Test func anAdminRemovesItselfFromTheAdminsAndMakesNoFurtherChange() throws {
        var g = EpochGroup(3, seed: 33, admins: [0, 1])
        let stepDown = try g.members[0].changeAdmins(to: [g.node(1)], members: g.nodes, now: 1, using: &g.rng)
        g.deliver([stepDown], to: [1, 2], now: 1)
        #expect(g.members.allSatisfy { $0.admins == [g.node(1)] && $0.head == stepDown.hash })
        #expect(throws: CoreError.notAdmin) { try g.rekey(0, now: 2) }
        // Its change made by hand on top anyway: refused as a non-admin's, at every member.
        let after = try Self.forged(&g, by: 0, epoch: 2, parent: stepDown.hash, admins: [g.node(0), g.node(1)], madeAt: 5_000)
        #expect(g.members[1].receive(after, now: 5) == .refused(.epochNotAdmin) && g.members[2].receive(after, now: 5) == .refused(.epochNotAdmin))
        // Still a member: it is on the roster and holds the key.
        #expect(g.members[0].current == g.members[2].current && g.members[0].current != nil)
        let byOne = try g.remove(1, [2], now: 6)
        #expect(g.deliver([byOne], to: [0], now: 6)[0] == .moved(g.members[1].current!))
    }

    /// Admins 0 and 1. Admin 0 drops 1 from the admins while 1 removes member 3, both on epoch 0,
    /// 1's change with the lower hash. Whatever order they arrive in, every member follows 0's
    /// change (1's sibling is excluded: it is demoted there), 3 stays removed (a removal on a
    /// losing branch counts) and is removed again on top by the remaining admin; 1's admin change
    /// from there — demoted — is refused. (Without the exclusion the lower hash, 1's, won, and the
    /// demotion was lost: 1 could undo any demotion by grinding a sibling.)
    @Test func aDemotionRacingARemovalKeepsBoth() throws {
        var g = EpochGroup(4, seed: 34, admins: [0, 1])
        let demote = try g.members[0].changeAdmins(to: [g.node(0)], members: g.nodes, now: 1, using: &g.rng)
        var lower: EpochChange?
        for _ in 0..<64 {
            let removal = try Self.forged(&g, by: 1, admins: [g.node(0), g.node(1)], removed: [g.node(3)], madeAt: 1_000)
            if bytesPrecede(removal.hash, demote.hash) { lower = removal; break }
        }
        let removal = try #require(lower)
        g.deliver([removal], to: [0, 1, 2, 3], now: 1)
        g.deliver([demote], to: [1, 2, 3], now: 1)
        var other = EpochGroup(4, seed: 34, admins: [0, 1])
        _ = other.members[2].receive(demote, now: 1)
        _ = other.members[2].receive(removal, now: 1)
        for head in [g.members[0].head, g.members[1].head, g.members[2].head, other.members[2].head] { #expect(head == demote.hash) }
        for i in 0..<3 { #expect(g.members[i].removedNodes[g.node(3)] != nil && g.members[i].admins == [g.node(0)]) }
        let now = g.converge(among: [0, 1, 2], now: 3)
        for i in 0..<3 {
            #expect(g.members[i].admins == [g.node(0)])
            #expect(!(g.members[i].roster?.contains(g.node(3)) ?? true), "the removal was made again on the winning branch")
        }
        let late = try Self.forged(&g, by: 1, epoch: g.members[2].epoch + 1, parent: g.members[2].head, admins: [g.node(0), g.node(1)],
                                   madeAt: UInt64(now * 1000) + 10_000)
        #expect(g.members[2].receive(late, now: now + 20) == .refused(.epochNotAdmin))
    }

    /// Admins 0, 1 and 2. Admin 0 drops 1 from the admins while 1, still an admin of epoch 0,
    /// removes 0 in a sibling (its hash ground lower). Before, 1's sibling won at every member, in
    /// any order: both were excluded (each maker is removed or demoted by the other), but only 0's
    /// "undid" something (it hands 0 a key), so 1 stayed admin and 0 was removed. Now keeping a
    /// demoted admin counts as undoing like handing a removed key does, and the demotion on the
    /// losing branch is made again on the head: 0 stays removed, 1 is no admin, 2 is.
    @Test func aDemotedAdminCannotOutrunItsDemotionByRemovingItsDemoter() throws {
        var g = EpochGroup(4, seed: 35, admins: [0, 1, 2])
        let all = [g.node(0), g.node(1), g.node(2)]
        let demote = try g.members[0].changeAdmins(to: [g.node(0), g.node(2)], members: g.nodes, now: 1, using: &g.rng)
        var lower: EpochChange?
        for _ in 0..<64 {
            let removal = try Self.forged(&g, by: 1, admins: all, removed: [g.node(0)], madeAt: 1_000)
            if bytesPrecede(removal.hash, demote.hash) { lower = removal; break }
        }
        let removal = try #require(lower)
        g.deliver([removal], to: [1, 2, 3], now: 1)
        g.deliver([demote], to: [1, 2, 3], now: 1)
        let now = g.converge(among: [1, 2, 3], now: 3)
        for i in 1...3 {
            #expect(g.members[i].removedNodes[g.node(0)] != nil, "member \(i): 0 stays removed")
            #expect(!g.members[i].admins.contains(g.node(1)), "member \(i): 1 is no admin (admins \(g.members[i].admins.count))")
            #expect(g.members[i].admins.contains(g.node(2)))
            #expect(g.members[i].pendingDemotions.isEmpty)
        }
        #expect(g.members[1].head == g.members[2].head && g.members[2].head == g.members[3].head)
        let late = try Self.forged(&g, by: 1, epoch: g.members[2].epoch + 1, parent: g.members[2].head, admins: all,
                                   madeAt: UInt64(now * 1000) + 10_000)
        #expect(g.members[2].receive(late, now: now + 20) == .refused(.epochNotAdmin))
    }

    /// An admin removed from the session (by another admin) cannot change the admins: on top of its
    /// removal its change is refused; as a sibling of its removal it is excluded.
    @Test func aRemovedAdminsAdminChangeNeverCounts() throws {
        var g = EpochGroup(3, seed: 35, admins: [0, 1])
        let removal = try g.remove(0, [1], now: 1)
        g.deliver([removal], to: [1, 2], now: 1)
        let onTop = try Self.forged(&g, by: 1, epoch: 2, parent: removal.hash, admins: [g.node(1)], madeAt: 5_000)
        #expect(g.members[2].receive(onTop, now: 5) == .refused(.epochMakerRemoved))
        let sibling = try Self.forged(&g, by: 1, admins: [g.node(1)], madeAt: 5_000)
        #expect(g.members[2].receive(sibling, now: 5) == .recorded)
        #expect(g.members[2].head == removal.hash && g.members[2].admins == [g.node(0), g.node(1)].sorted(by: bytesPrecede))
        // Replays: the same change again is a duplicate; into another session it is foreign.
        #expect(g.members[2].receive(removal, now: 6) == .duplicate)
        var other = EpochGroup(3, seed: 36, admins: [0, 1])
        #expect(other.members[2].receive(removal, now: 6) == .refused(.epochOtherSession))
    }

    /// The admin set survives a restart (`EpochMemory` keeps the root key with its admins), and a
    /// memory row written before admins existed still reads (no admins, no remembered cut-offs).
    @Test func theAdminSetAndOldMemoryRowsSurviveARestart() throws {
        var g = EpochGroup(3, seed: 37, admins: [0])
        let change = try g.members[0].changeAdmins(to: [g.node(0), g.node(2)], members: g.nodes, now: 1, using: &g.rng)
        g.deliver([change], to: [1, 2], now: 1)
        let memory = try #require(g.members[1].memory)
        let decoded = try EpochMemory.decode(memory.encoded())
        #expect(decoded == memory && decoded.rootKey.admins == [g.node(0)])
        var restarted = EpochHistory(key: g.genesis, identity: g.members[1].identity, local: MemberID(raw: 2))
        restarted.recall(decoded, now: 2)
        #expect(restarted.admins == g.members[1].admins && restarted.head == change.hash)

        var open = EpochGroup(2, seed: 38)
        let old = try #require(open.members[0].memory)
        let bytes = old.encoded()
        // What a build before issue 33 wrote: no format byte, no admins, no cut-offs.
        let before = Array(bytes.dropFirst().dropLast(8))
        #expect(bytes.first == EpochMemory.format && bytes.suffix(8).allSatisfy { $0 == 0 })
        #expect(try EpochMemory.decode(before) == old)
        // A newer row cut where an older one would end is damaged, not an older row.
        #expect(throws: CoreError.self) { try EpochMemory.decode(Array(bytes.dropLast(8))) }
    }
}
