import HuddleCrypto

/// Making epoch changes: `rekey`, `remove`, and the re-issue of removals lost to a concurrent change.
extension EpochHistory {
    /// Moves the session to a new epoch with a new key, removing nobody (routine rotation).
    /// `members`: the node keys of the members the caller knows in the current epoch (alive,
    /// suspected, failed but remembered); the roster adds the current roster's node keys seen within
    /// the grace and this member, and leaves out every removed node key. Returns the change to send
    /// to every member; this member has already moved to it.
    /// `origins`: every origin this member knows with its node key and the highest seq of it
    /// delivered here: the cut-offs of the node keys a change removes (`EpochHistory+Cutoffs`).
    public mutating func rekey(members: [[UInt8]], origins: [EpochChange.Cutoff] = [], now: Double, using rng: inout some RandomNumberGenerator) throws(CoreError) -> EpochChange {
        try make(removing: [], members: members, origins: origins, now: now, using: &rng)
    }

    /// Moves the session to a new epoch whose key `nodes` are not handed, and removes them for good.
    /// A member the head's roster leaves out (`lockout`) removes on the head's parent instead: its
    /// change is a sibling of the head, and wins over it whenever the head hands a key to one of
    /// `nodes` or its maker is among them.
    public mutating func remove(_ nodes: [[UInt8]], members: [[UInt8]], origins: [EpochChange.Cutoff] = [], now: Double, using rng: inout some RandomNumberGenerator) throws(CoreError) -> EpochChange {
        guard !nodes.isEmpty else { throw .nobodyToRemove }
        guard !nodes.contains(nodeKey) else { throw .removingSelf }
        if let lockout { return try make(on: lockout.parent, removing: nodes, members: members, origins: origins, now: now, using: &rng) }
        return try make(removing: nodes, members: members, origins: origins, now: now, using: &rng)
    }

    /// Moves the session to a new epoch whose admin set is `admins` (issue 33), removing nobody: only
    /// an admin of the current epoch may, only in a session that has admins, and never to an empty
    /// set. An admin may drop itself (it then makes no further change). The change is validated by
    /// every member against the admin set of its parent, like any other.
    public mutating func changeAdmins(to admins: [[UInt8]], members: [[UInt8]], origins: [EpochChange.Cutoff] = [], now: Double,
                                      using rng: inout some RandomNumberGenerator) throws(CoreError) -> EpochChange {
        let admins = sortedUnique(admins)
        guard !self.admins.isEmpty, !admins.isEmpty, admins.count <= SessionKey.maxAdmins,
              admins.allSatisfy({ $0.count == SessionKey.adminKeyLength }) else { throw .adminsUnchangeable }
        // At least one admin that can act: a member of the session (this one, one of `members`, or
        // on the head's roster) and not removed — else no change could ever be made again.
        let roster = entries[head]?.roster ?? []
        guard admins.contains(where: { removedNodes[$0] == nil && ($0 == nodeKey || members.contains($0) || roster.contains($0)) }) else {
            throw .adminsUnchangeable
        }
        return try make(removing: [], members: members, origins: origins, admins: admins, now: now, using: &rng)
    }

    /// Node keys removed somewhere (a losing branch) but not on the winning branch, that are still on
    /// the head's roster: they may hold the current key, so a change must remove them.
    public var pendingRemovals: [[UInt8]] { pendingRemovals(at: head) }

    /// Node keys removed somewhere but not on the way to `hash`, that are on `hash`'s roster.
    func pendingRemovals(at hash: [UInt8]) -> [[UInt8]] {
        guard let roster = entries[hash]?.roster else { return [] }
        let removedOnChain = ancestryRemovals(of: hash)
        return removedNodes.keys.filter { roster.contains($0) && !removedOnChain.contains($0) }.sorted(by: bytesPrecede)
    }

    /// Admins demoted somewhere (a losing branch) but not on the winning branch, that are still in
    /// the head's admin set: the next change made on the head drops them (a re-issue is due).
    public var pendingDemotions: [[UInt8]] { pendingDemotions(at: head) }

    /// Node keys demoted somewhere but not on the way to `hash`, that are in `hash`'s admin set.
    func pendingDemotions(at hash: [UInt8]) -> [[UInt8]] {
        guard let admins = entries[hash]?.admins, !admins.isEmpty else { return [] }
        let onChain = ancestryDemotions(of: hash)
        return demotedNodes.filter { admins.contains($0) && !onChain.contains($0) }.sorted(by: bytesPrecede)
    }

    /// When this member should re-issue the pending removals (and demotions): now when it is the member designated
    /// to, `reissueDelay` after they were found otherwise; nil when there is nothing to re-issue or
    /// this member may not (it does not hold the current key by the roster, or is not an admin when
    /// the session has admins). The session core wakes at this time.
    public var reissueDeadline: Double? {
        guard let since = pendingSince, current != nil, !isRemoved, mayMake(nodeKey, at: head),
              entries[head]?.roster?.contains(nodeKey) ?? true else { return nil }
        return max(designatedReissuer == nodeKey ? since : since + settings.reissueDelay, retryAt)
    }

    /// The member that re-issues at once: the lowest node key among the makers of the changes that
    /// made the pending removals, still on the head's roster and not removed (admins only when set);
    /// else the lowest such node key on the roster.
    var designatedReissuer: [UInt8]? {
        let pending = Set(pendingRemovals), demoted = Set(pendingDemotions)
        guard !pending.isEmpty || !demoted.isEmpty, let roster = entries[head]?.roster else { return nil }
        let able = roster.filter { removedNodes[$0] == nil && !demoted.contains($0) && mayMake($0, at: head) }
        let makers = entries.values.filter { entry in
            entry.removed.contains(where: pending.contains)
                || demotions(by: entry).contains(where: demoted.contains)
        }.compactMap(\.makerNodeKey).filter(able.contains)
        return (makers.isEmpty ? Array(able) : makers).min(by: bytesPrecede)
    }

    /// Re-issues the pending removals on top of the head when `reissueDeadline` has come: the change
    /// to send, or nil when nothing is due.
    public mutating func reissue(members: [[UInt8]], origins: [EpochChange.Cutoff] = [], now: Double, using rng: inout some RandomNumberGenerator) -> EpochChange? {
        guard let deadline = reissueDeadline, now >= deadline else { return nil }
        let change = try? make(removing: [], members: members, origins: origins, now: now, using: &rng)
        if change == nil || reissueDeadline != nil { retryAt = now + settings.reissueDelay }
        return change
    }

    /// Whether `node` may make a change on the epoch `base`: every member when it has no admins.
    func mayMake(_ node: [UInt8], at base: [UInt8]) -> Bool {
        let admins = entries[base]?.admins ?? []
        return admins.isEmpty || admins.contains(node)
    }

    /// Makes, keeps and returns a change on top of `base` (the head unless given: a locked-out
    /// member's counter-change is made on the head's parent) removing `removing` and every removal
    /// pending there; with the admin set `admins` (nil: `base`'s).
    mutating func make(on base: [UInt8]? = nil, removing: [[UInt8]], members: [[UInt8]], origins: [EpochChange.Cutoff] = [],
                       admins newAdmins: [[UInt8]]? = nil, now: Double, using rng: inout some RandomNumberGenerator) throws(CoreError) -> EpochChange {
        let base = ownTip(from: base ?? head)
        guard let key = keys[base], let baseEpoch = entries[base]?.epoch, !isRemoved else { throw .notHandedCurrentKey }
        guard mayMake(nodeKey, at: base) else { throw .notAdmin }
        // A member handed the key by a grant is not on the roster: only the roster makes the next epoch.
        guard entries[base]?.roster?.contains(nodeKey) ?? true else { throw .notOnRoster }
        let removed = sortedUnique(removing + pendingRemovals(at: base))
        guard removed.count <= EpochChange.maxRemoved else { throw .tooManyToRemove }
        // Never above its own rate: the change would wait at every member (`EpochHistory+Rate`).
        let stamp = stamp(on: base, now: now)
        // (A time one millisecond above its previous change's, on a clock that has not moved on, is not a delay.)
        guard stamp.release <= max(now + wallClockOffset, Double(stamp.madeAt) / 1000) else {
            throw .rateLimited(until: stamp.release - wallClockOffset)
        }
        for node in members { lastSeen[node] = now }
        let excluded = Set(removed).union(removedNodes.keys)
        let roster = rosterFor(base: base, members: members, excluding: excluded, now: now)
        let newKey = randomBytes(32, &rng), sealSeed = randomBytes(32, &rng)
        let change: EpochChange
        do {
            change = try EpochChange.make(session: sessionID, epoch: baseEpoch &+ 1, parent: key.head, maker: local, identity: identity,
                                          madeAt: stamp.madeAt, removed: removed, cutoffs: Self.cutoffs(for: removed, from: origins),
                                          roster: roster, admins: newAdmins ?? carriedAdmins(on: base), key: newKey, sealSeed: sealSeed)
        } catch { throw .cannotSeal }
        if let refusal = insert(change, hash: change.hash, now: now) { throw .ownChangeRefused(refusal) }
        settle(now: now)
        return change
    }

    /// The admin set a change on `base` carries unless it sets one: `base`'s, without the admins a
    /// losing branch demoted (`pendingDemotions`) — unless that would leave none.
    func carriedAdmins(on base: [UInt8]) -> [[UInt8]] {
        let carried = entries[base]?.admins ?? []
        let demoted = Set(pendingDemotions(at: base))
        let kept = carried.filter { !demoted.contains($0) }
        return kept.isEmpty ? carried : kept
    }

    /// The roster of an epoch on `base`: this member, `members`, and `base`'s roster entries seen within
    /// the grace, without `excluded` and node keys nothing can be sealed to; at most
    /// `EpochChange.maxRoster`, the most recently seen kept first.
    func rosterFor(base: [UInt8], members: [[UInt8]], excluding excluded: Set<[UInt8]>, now: Double) -> [[UInt8]] {
        let carried = (entries[base]?.roster ?? []).filter { node in lastSeen[node].map { now - $0 <= settings.grace } ?? false }
        var candidates = Set(members).union(carried)
        candidates.remove(nodeKey)
        let ordered = candidates.filter { !excluded.contains($0) && SealedBox.canSeal(to: $0) }
            .sorted { a, b in
                let seenA = lastSeen[a] ?? 0, seenB = lastSeen[b] ?? 0
                return seenA != seenB ? seenA > seenB : bytesPrecede(a, b)
            }
        return [nodeKey] + ordered.prefix(EpochChange.maxRoster - 1)
    }
}

extension EpochHistory {
    /// Where this member's next change on `base` goes: `base`, or, when this member made a change on
    /// it already, the tip of its own changes from there (one change per parent and maker: a second
    /// would prove this member equivocates). A locked-out member whose counter-change lost to a
    /// second capture removes that capture's maker on top of its own counter-change: that branch
    /// then removes both makers, and both captures are excluded. Opens its key there when needed.
    mutating func ownTip(from base: [UInt8]) -> [UInt8] {
        var tip = base
        while let mine = entries[tip]?.children.first(where: { entries[$0]?.makerNodeKey == nodeKey }) { tip = mine }
        if tip != base, keys[tip] == nil, let key = entries[tip]?.change?.openKey(with: identity) { keys[tip] = key }
        return tip
    }
}

/// `n` bytes from `rng` (the node passes the system's secure generator; the simulator a seeded one).
func randomBytes(_ n: Int, _ rng: inout some RandomNumberGenerator) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(n + 8)
    while out.count < n { out += bigEndian(rng.next()) }
    return Array(out.prefix(n))
}
