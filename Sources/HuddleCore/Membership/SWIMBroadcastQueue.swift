/// Pending membership updates waiting to be piggybacked (memberlist `TransmitLimitedQueue`).
///
/// Guarantees: at most one update per member is pending (a newer update about a member replaces
/// the older one), except that suspicions of one member by different suspecters are pending side
/// by side (they are Lifeguard's independent confirmations: if they replaced each other, members
/// would hear too few of them and the suspicion timeout would not shrink), until any other update
/// about that member replaces them all; updates sent the fewest times go first, newest first among equals; each update
/// is sent at most `limit` times, then dropped; one `take` never returns the same update twice and
/// never exceeds its byte budget. `take` costs time proportional to what it returns plus stale
/// entries it discards, not to the queue length.
public struct SWIMBroadcastQueue: Sendable {
    private struct Entry: Sendable {
        var gossip: SWIMGossip
        var generation: UInt64
        var size: Int
    }

    /// `buckets[t]` holds updates sent `t` times, oldest first.
    private var buckets: [[Entry]] = [[]]
    /// What an update replaces: the pending update about the same member, or for a suspicion the
    /// pending suspicion of the same member by the same suspecter.
    private struct Key: Hashable, Sendable {
        let member: MemberID
        let suspecter: MemberID?
        init(member: MemberID, suspecter: MemberID?) { self.member = member; self.suspecter = suspecter }
        init(_ gossip: SWIMGossip) {
            member = gossip.member
            if case let .suspect(_, _, from, _) = gossip { suspecter = from } else { suspecter = nil }
        }
    }

    /// The current generation of each pending update; entries of older generations are stale.
    private var current: [Key: UInt64] = [:]
    /// The suspecters whose suspicions of a member are pending.
    private var suspecters: [MemberID: Set<MemberID>] = [:]
    private var generation: UInt64 = 0

    public init() {}

    /// How many updates are pending.
    public var count: Int { current.count }
    public var isEmpty: Bool { current.isEmpty }

    /// Queues `gossip`, replacing the pending update it supersedes (see the type's guarantees).
    public mutating func enqueue(_ gossip: SWIMGossip) {
        generation += 1
        let key = Key(gossip)
        current[Key(member: key.member, suspecter: nil)] = nil
        if let suspecter = key.suspecter {
            suspecters[key.member, default: []].insert(suspecter)
        } else {
            for suspecter in suspecters.removeValue(forKey: key.member) ?? [] {
                current[Key(member: key.member, suspecter: suspecter)] = nil
            }
        }
        current[key] = generation
        buckets[0].append(Entry(gossip: gossip, generation: generation, size: gossip.encodedSize))
    }

    /// The newest pending update about `member`, if any.
    public func pending(_ member: MemberID) -> SWIMGossip? {
        let keys = [Key(member: member, suspecter: nil)] + (suspecters[member] ?? []).map { Key(member: member, suspecter: $0) }
        guard let g = keys.compactMap({ current[$0] }).max() else { return nil }
        for bucket in buckets { if let e = bucket.last(where: { $0.generation == g }) { return e.gossip } }
        return nil
    }

    private mutating func forget(_ key: Key) {
        current[key] = nil
        if let suspecter = key.suspecter {
            suspecters[key.member]?.remove(suspecter)
            if suspecters[key.member]?.isEmpty == true { suspecters[key.member] = nil }
        }
    }

    /// Up to `budget` bytes of updates; each counts as one more transmission, dropped at `limit`.
    public mutating func take(budget: Int, limit: Int) -> [SWIMGossip] {
        var out: [SWIMGossip] = []
        var left = budget
        var moved: [(Int, Entry)] = []
        var t = 0
        while t < buckets.count, left >= SWIMGossip.minimumEncodedSize, out.count < SWIMMessage.maxGossip {
            var i = buckets[t].count - 1
            var lowestRemoved = buckets[t].count
            var removed: [Int] = []
            var skipped = 0
            while i >= 0, skipped < 32, left >= SWIMGossip.minimumEncodedSize, out.count < SWIMMessage.maxGossip {
                let e = buckets[t][i]
                if current[Key(e.gossip)] != e.generation {
                    removed.append(i); lowestRemoved = i
                } else if e.size <= left {
                    out.append(e.gossip); left -= e.size
                    removed.append(i); lowestRemoved = i
                    if t + 1 < limit { moved.append((t + 1, e)) } else { forget(Key(e.gossip)) }
                } else {
                    skipped += 1
                }
                i -= 1
            }
            if !removed.isEmpty {
                // `removed` is descending; compact the tail from the lowest removed index.
                let drop = Set(removed)
                var kept: [Entry] = []
                kept.reserveCapacity(buckets[t].count - lowestRemoved - removed.count)
                for j in lowestRemoved..<buckets[t].count where !drop.contains(j) { kept.append(buckets[t][j]) }
                buckets[t].removeSubrange(lowestRemoved...)
                buckets[t].append(contentsOf: kept)
            }
            t += 1
        }
        for (bucket, e) in moved {
            while buckets.count <= bucket { buckets.append([]) }
            buckets[bucket].append(e)
        }
        return out
    }

    /// Drops everything pending.
    public mutating func removeAll() {
        buckets = [[]]; current = [:]; suspecters = [:]
    }
}
