import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 21: several members make rotations and removals at random while changes travel in random
/// orders, delayed, and for a while across a partition; once everything has been exchanged every
/// member agrees on the head, the key and who is removed. Seeded: each seed is one reproducible run.
@Suite struct EpochSimulationTests {
    @Test(arguments: 1...12)
    func randomChangesInRandomOrdersConverge(seed: UInt64) throws {
        let n = 6
        var g = EpochGroup(n, seed: seed)
        var rng = SWIMRandom(seed: seed &* 7919)
        var inbox: [[EpochChange]] = Array(repeating: [], count: n)
        var removedTargets: Set<Int> = []
        // A partition for the first half of the run: a random split.
        let sideOf = (0..<n).map { _ in rng.index(2) }
        var now = 0.0
        func connected(_ a: Int, _ b: Int, _ step: Int) -> Bool { step >= 20 || sideOf[a] == sideOf[b] }
        var held: [(to: Int, change: EpochChange)] = []
        for step in 0..<40 {
            now += 1
            // Someone makes a change.
            let maker = rng.index(n)
            if g.members[maker].current != nil, !g.members[maker].isRemoved {
                var change: EpochChange?
                if removedTargets.count < 2, rng.index(3) == 0 {
                    let candidates = (0..<n).filter { $0 != maker && !removedTargets.contains($0) }
                    let target = candidates[rng.index(candidates.count)]
                    change = try? g.remove(maker, [target], now: now)
                    if change != nil { removedTargets.insert(target) }
                } else {
                    change = try? g.rekey(maker, now: now)
                }
                if let change { for j in 0..<n where j != maker { held.append((j, change)) } }
            }
            // Some messages travel, in random order; across the partition they wait for the heal.
            var next: [(to: Int, change: EpochChange)] = []
            for message in held {
                let from = g.members.firstIndex { $0.nodeKey == message.change.makerNodeKey } ?? 0
                if connected(from, message.to, step), rng.index(2) == 0 { inbox[message.to].append(message.change) } else { next.append(message) }
            }
            held = next
            for i in 0..<n {
                var batch = inbox[i]
                inbox[i] = []
                for k in stride(from: batch.count - 1, to: 0, by: -1) { batch.swapAt(k, rng.index(k + 1)) }
                for change in batch { _ = g.members[i].receive(change, now: now) }
            }
        }
        for message in held { _ = g.members[message.to].receive(message.change, now: now) }
        _ = g.converge(now: now + 1)
        // Whoever was removed by anyone is removed everywhere; the rest agree on head and key.
        let removed = Set((0..<n).filter { i in g.members.contains { $0.removedNodes[g.node(i)] != nil } })
        #expect(removedTargets.isSubset(of: removed), "seed \(seed): a removal was lost")
        let alive = (0..<n).filter { !removed.contains($0) }
        try #require(!alive.isEmpty)
        let reference = g.members[alive[0]]
        for i in alive {
            #expect(g.members[i].head == reference.head, "seed \(seed): member \(i) on another head")
            #expect(g.members[i].current != nil && g.members[i].current == reference.current, "seed \(seed): member \(i) without the key")
            #expect(Set(g.members[i].removedNodes.keys) == Set(removed.map(g.node)), "seed \(seed): member \(i) disagrees on removals")
        }
        for r in removed {
            #expect(!(reference.roster ?? []).contains(g.node(r)), "seed \(seed): removed member \(r) on the roster")
            #expect(g.members[r].current == nil, "seed \(seed): removed member \(r) holds the current key")
        }
        let forks = reference.entries.values.filter { $0.children.count > 1 }.count
        #expect(forks > 0 && !removedTargets.isEmpty, "seed \(seed): the run made concurrent changes and removals")
    }
}
