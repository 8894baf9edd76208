import HuddleCrypto

/// Lockout (issue 33): a change whose roster leaves out members of its parent's roster without
/// removing them — a hostile member's rekey with the roster {itself}, ground to the lowest hash,
/// is the extreme — moves everyone to an epoch whose key only its roster holds, and only that
/// roster may make the next epoch. The members it left out are not stuck there:
///
/// - A member that was on the parent's roster (or whose parent roster is unknown: it started there
///   from its key file), still holds the parent's key, and is left off the head's roster without
///   being removed is **locked out** (`lockout`). Its `remove` is made on the parent, as a sibling
///   of the head; the fork choice excludes a sibling whose maker a sibling removes, so removing the
///   head's maker takes the session off the head's branch.
/// - Left out and not granted the head's key within `reissueDelay` (an honest maker that left a
///   member out grants it the key as soon as it links, `handover`), it makes that counter-change by
///   itself (`counter`): the member that is left out first in node-key order at once, the others
///   after twice the delay, so one counter-change usually settles it (several converge as siblings).
///
/// An honest maker leaves out only members it has not seen for the grace (7 days), and grants
/// them the key when they link; a member left out that way and granted makes no counter-change.
/// A joiner that a concurrent change left out (its maker did not know it yet) is granted the key
/// by the members that let it in on the epoch before (`vouch`), well within the delay.
extension EpochHistory {
    /// The head's parent and the head's maker, when this member is locked out of the head (see
    /// above). A member granted the head's key is still locked out of making the next epoch (only
    /// the roster makes it): its `remove` goes on the parent; it makes no counter-change by itself.
    public var lockout: (parent: [UInt8], maker: [UInt8])? {
        guard !isRemoved, let entry = entries[head], let parent = entry.parent, let roster = entry.roster, let maker = entry.makerNodeKey,
              maker != nodeKey, !roster.contains(nodeKey), !entry.removed.contains(nodeKey), keys[parent] != nil,
              entries[parent]?.roster?.contains(nodeKey) ?? true, mayMake(nodeKey, at: parent) else { return nil }
        return (parent, maker)
    }

    /// When this member makes its counter-change (see above): nil when it is not locked out, or holds
    /// the head's key by a grant.
    public var counterDeadline: Double? {
        guard let since = lockedOutSince, current == nil, let entry = entries[head], let parent = entry.parent else { return nil }
        let leftOut = (entries[parent]?.roster ?? []).subtracting(entry.roster ?? []).filter { removedNodes[$0] == nil && mayMake($0, at: parent) }
        let first = leftOut.min(by: bytesPrecede) ?? nodeKey
        return max(since + settings.reissueDelay * (first == nodeKey ? 1 : 2), retryAt)
    }

    /// The counter-change of a locked-out member, when `counterDeadline` has come: a change on the
    /// head's parent that removes the head's maker. Nil when nothing is due.
    public mutating func counter(members: [[UInt8]], origins: [EpochChange.Cutoff] = [], now: Double, using rng: inout some RandomNumberGenerator) -> EpochChange? {
        guard let deadline = counterDeadline, now >= deadline, let lockout else { return nil }
        let change = try? make(on: lockout.parent, removing: [lockout.maker], members: members, origins: origins, now: now, using: &rng)
        // Not made, or made and lost to another sibling: not again before another delay (then on top
        // of its own change, `ownTip`), so a failure does not make the session core spin.
        if change == nil || counterDeadline != nil { retryAt = now + settings.reissueDelay }
        return change
    }
}
