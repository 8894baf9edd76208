import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 33: epoch changes are rate-limited per maker — three in a row, then one per 2 s, by the
/// times the makers sign into their changes — delayed, not refused, and decided by the signed data
/// alone, so members that receive the changes in other orders and at other moments never fork.
/// Members 0 and 1 are honest, 2 makes changes as fast as it likes.
@Suite struct EpochRateTests {
    static let hostile = 2

    /// A chain of changes by the hostile member, each on the one before, signed at `times` (ms).
    static func chain(_ g: inout EpochGroup, times: [UInt64]) throws -> [EpochChange] {
        var parent = g.genesis.head
        var out: [EpochChange] = []
        for (i, t) in times.enumerated() {
            let change = try EpochChange.make(session: g.genesis.sessionID, epoch: UInt64(i + 1), parent: parent, maker: MemberID(raw: 3),
                                              identity: g.members[hostile].identity, madeAt: t, removed: [], roster: g.nodes,
                                              key: randomBytes(32, &g.rng), sealSeed: randomBytes(32, &g.rng))
            out.append(change)
            parent = change.hash
        }
        return out
    }

    /// Five changes signed within 5 ms: the first three count at once, the fourth from 2 s after
    /// the first, the fifth from 4 s (the burst used, one per 2 s; each taken up to the 1 s clock
    /// tolerance early). Member 0 receives them in order at once; member 1 in reverse order, 2.5 s later. Both take each at the moment the rule gives,
    /// and hold the same head whenever both are past it. Before: all five counted at once.
    @Test func changesAboveTheMakersRateAreDelayedAlikeEverywhere() throws {
        var g = EpochGroup(3, seed: 9)
        let changes = try Self.chain(&g, times: [10_000, 10_001, 10_002, 10_003, 10_004])
        let receipts = changes.map { g.members[0].receive($0, now: 10.01) }
        #expect(receipts.suffix(2) == [.waiting, .waiting], "the fourth and fifth wait: \(receipts)")
        #expect(g.members[0].epoch == 3 && g.members[0].head == changes[2].hash)
        #expect(g.members[0].nextRelease == 11, "the fourth counts 2 s after the first (less the tolerance)")
        #expect(g.members[0].releaseDelayed(now: 10.99) == .duplicate && g.members[0].epoch == 3)
        guard case .moved = g.members[0].releaseDelayed(now: 11) else { Issue.record("not moved at 11"); return }
        #expect(g.members[0].head == changes[3].hash && g.members[0].nextRelease == 13)

        for change in changes.reversed() { _ = g.members[1].receive(change, now: 12.5) }
        #expect(g.members[1].head == changes[3].hash, "member 1, later and in another order, is where member 0 is")
        #expect(g.members[1].nextRelease == 13)
        for i in 0...1 { _ = g.members[i].releaseDelayed(now: 13) }
        #expect(g.members[0].head == changes[4].hash && g.members[1].head == changes[4].hash)
        #expect(g.members[0].current == g.members[1].current && g.members[0].current != nil)
    }

    /// A change whose signed time is not above its maker's previous change in its ancestry is not
    /// refused (a member whose history starts later cannot see that previous change: refusing
    /// would fork it from the others); it counts as just after the previous one, so it waits for
    /// the maker's rate like any other, and every member, whatever it holds, ends on it.
    @Test func aSignedTimeNotAboveTheMakersPreviousCountsAsJustAfterItEverywhere() throws {
        var g = EpochGroup(3, seed: 10)
        let first = try Self.chain(&g, times: [50_000])[0]
        let again = try EpochChange.make(session: g.genesis.sessionID, epoch: 2, parent: first.hash, maker: MemberID(raw: 3),
                                         identity: g.members[Self.hostile].identity, madeAt: 50_000, removed: [], roster: g.nodes,
                                         key: randomBytes(32, &g.rng), sealSeed: randomBytes(32, &g.rng))
        for (i, now) in [(0, 60.0), (1, 1_000_000.0)] {
            _ = g.members[i].receive(first, now: now)
            if case let .refused(reason) = g.members[i].receive(again, now: now) { Issue.record("member \(i) refused it: \(reason)") }
            _ = g.members[i].releaseDelayed(now: now + 10)
            #expect(g.members[i].head == again.hash, "member \(i) took the change made at the same signed time")
        }
    }

    /// An honest member never makes a change above its own rate: its fourth `rekey` in a row is
    /// refused (`rateLimited`, until when) and made once that time comes; the others take it at once.
    @Test func anHonestMakerWaitsForItsOwnRate() throws {
        var g = EpochGroup(3, seed: 11)
        for (n, now) in [1.0, 1.1, 1.2].enumerated() {
            let change = try g.rekey(0, now: now)
            #expect(change.madeAt == UInt64(now * 1000) && change.epoch == UInt64(n + 1))
            g.deliver([change], to: [1], now: now)
        }
        #expect(throws: CoreError.rateLimited(until: 3)) { try g.rekey(0, now: 1.3) }
        let fourth = try g.rekey(0, now: 3)
        let key = try #require(g.members[0].current)
        #expect(g.deliver([fourth], to: [1], now: 3)[1] == .moved(key))
        #expect(g.members[1].head == fourth.hash)
    }

    /// What a maker's signed times can do is bounded: a flood of far-future changes keeps at most
    /// `maxWaiting` aside, and the session stays where it was.
    @Test func farFutureChangesWaitWithinTheBound() throws {
        var g = EpochGroup(3, seed: 12)
        let times = (0..<3 * g.members[0].settings.maxWaiting).map { UInt64(1 << 50) + UInt64($0) }
        let changes = try Self.chain(&g, times: times)
        for change in changes { _ = g.members[0].receive(change, now: 5) }
        #expect(g.members[0].epoch == 0)
        #expect(g.members[0].delayed.count + g.members[0].waiting.count <= 2 * g.members[0].settings.maxWaiting)
        #expect((g.members[0].nextRelease ?? 0) >= Double(1 << 50) / 1000 - g.members[0].settings.clockTolerance)
    }
}
