import HuddleCrypto

/// Roster rules: what a receiver checks of every new roster against its parent's ("Rosters" in
/// the note at the top of EpochHistory.swift), and the node keys proven to this member.
extension EpochHistory {
    /// Sets the node keys **proven** to this member: the session core passes the node keys of its
    /// member table (each record there is signed by the node key it names, so its holder signed it)
    /// and of its links (the link handshake proved the node key). A change that hands a key to a
    /// node key neither on its parent's roster nor proven here waits (with the changes waiting for
    /// their parent) until it is proven; this releases those that now are. Returns what that did.
    public mutating func prove(_ nodes: Set<[UInt8]>, now: Double) -> EpochReceipt {
        proven = nodes
        guard !waiting.isEmpty else { return .recorded }
        let before = (head: head, removed: isRemoved, key: current)
        let count = entries.count
        releaseWaiting(now: now)
        guard entries.count != count else { return .recorded }
        settle(now: now)
        return receipt(before: before)
    }

    /// Whether every node key `change` adds to its parent's roster is proven here (its maker aside:
    /// its signature proves it). True when the parent is not known yet (checked when it is).
    func isProven(_ change: EpochChange) -> Bool {
        guard let parent = entries[change.parent] else { return true }
        let before = parent.roster ?? []
        return change.roster.allSatisfy { before.contains($0) || proven.contains($0) || $0 == change.makerNode }
    }

    /// Whether `change` leaves out a member of its parent's roster without removing it: every node
    /// key on the parent's roster that is not removed (by this change or before it) and that a key
    /// can be sealed to must be on the new roster. A parent whose roster is not known (epoch 0, or
    /// the epoch this member started from) has at least this member on it when this member holds
    /// its key: a change that would leave it out without removing it is refused, so no maker
    /// locks the others out with a roster of itself alone.
    func omitsParentMember(_ change: EpochChange, removedBefore: Set<[UInt8]>) -> Bool {
        guard let parent = entries[change.parent] else { return false }
        let required = parent.roster ?? (keys[change.parent] != nil ? [nodeKey] : [])
        let roster = Set(change.roster), removed = Set(change.removed)
        return required.contains { node in
            !roster.contains(node) && !removed.contains(node) && !removedBefore.contains(node) && SealedBox.canSeal(to: node)
        }
    }
}
