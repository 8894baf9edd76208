/// Cut-offs (issue 33): which broadcasts of a removed member count.
///
/// A removed member's messages used to be delivered wherever a member that had not heard of the
/// removal yet (or a hostile one) relayed them. Now the change that removes a node key carries,
/// signed by its maker, a **cut-off** per member id that node key runs as: the highest seq of that
/// origin's broadcasts the maker had delivered (`EpochChange.Cutoff`). Every member delivers the
/// origin's broadcasts up to the cut-off — one it lacks is repaired from any member that stores
/// it — and refuses every one above it, signed with the removed key under any epoch key
/// (`CausalBroadcast.setCutoff`, counted as `after_removal`).
///
/// - **One value everywhere.** Several changes may remove one node key (concurrent removals, a
///   re-issue): the cut-off is the highest any of them gives, from every kept change on any branch
///   and every forgotten one (`rememberedCutoffs`), except an equivocator's. Raising a cut-off only
///   lets through what is then repaired, so members converge on the highest as they hear the changes.
/// - **The race.** A member that delivered broadcasts above the cut-off *before* it heard of the
///   removal keeps them (nothing is undelivered); they are never delivered anywhere else, and an
///   honest message that depends on them is not held for them (`CausalBroadcast.depsSatisfied`).
///   A member missing an earlier seq cannot deliver later ones (seq order), so it holds them until
///   it hears the change and then drops those above the cut-off. Every honest member that heard of
///   the removal before the removed member's later broadcasts reached it delivers exactly the
///   origin's broadcasts 1...cut-off.
/// - **Unknown to the maker.** An origin of a removed node key that no change gives a cut-off for
///   (it joined as the change was made) is cut off where each member stands when it hears the removal.
/// - **A hostile remover's cut-off** (bounded, not checked). The cut-off is what the remover signs;
///   nobody can check what it had delivered, so a member allowed to remove a node key (any member
///   on the roster without admins, an admin with them) can set that key's cut-off as low as 0. It
///   costs no more than the removal that carries it: only the removed member's broadcasts made
///   before its removal and not yet delivered by a member when that member hears of the removal
///   are lost — nothing delivered is undelivered, every broadcast after the removal is refused
///   anyway, and a concurrent honest removal's higher cut-off counts (the highest wins). With
///   admins no non-admin can do it at all.
/// - **Bounds.** At most `EpochChange.maxCutoffs` per change; kept as long as the change, then at
///   most `maxRemembered` more.
/// - **Across a restart.** `EpochMemory` keeps the remembered ones with the changes, and a recalled
///   change that is not taken up again (below the root key) is remembered: a restarted member keeps
///   every cut-off it had.
extension EpochHistory {
    /// The cut-off of `origin` running as `node`, when some change that removes `node` gives one.
    public func cutoff(of origin: MemberID, node: [UInt8]) -> UInt64? {
        cutoffs[CutoffKey(origin: origin, node: node)]
    }

    /// Recomputes `cutoffs` from the kept changes and the remembered ones. A change counts only
    /// for node keys its own ancestry had not removed yet: "removing" a key again later (any
    /// member may make a change) must not raise the cut-off that the removal set.
    mutating func collectCutoffs() {
        var table = rememberedCutoffs
        for entry in entries.values {
            guard let change = entry.change, !change.cutoffs.isEmpty, !equivocators.contains(change.makerNodeKey) else { continue }
            let removedBefore = ancestryRemovals(of: change.parent)
            for c in change.cutoffs where !removedBefore.contains(c.node) {
                let key = CutoffKey(origin: c.origin, node: c.node)
                table[key] = max(table[key] ?? 0, c.seq)
            }
        }
        cutoffs = table
    }

    /// Keeps the cut-offs of a change about to be forgotten (not an equivocator's), within `maxRemembered`.
    mutating func rememberCutoffs(of entry: Entry) {
        guard let change = entry.change, !change.cutoffs.isEmpty, !equivocators.contains(change.makerNodeKey) else { return }
        let removedBefore = ancestryRemovals(of: change.parent)
        for c in change.cutoffs where !removedBefore.contains(c.node) { rememberCutoff(c) }
    }

    /// Remembers one cut-off (the highest per origin and node key), within `maxRemembered`.
    mutating func rememberCutoff(_ c: EpochChange.Cutoff) {
        let key = CutoffKey(origin: c.origin, node: c.node)
        guard rememberedCutoffs[key] != nil || rememberedCutoffs.count < settings.maxRemembered else { return }
        rememberedCutoffs[key] = max(rememberedCutoffs[key] ?? 0, c.seq)
    }

    /// The cut-offs a change removing `removed` carries: each candidate (an origin this member knows,
    /// its node key and the highest seq of it delivered here) whose node key it removes.
    static func cutoffs(for removed: [[UInt8]], from candidates: [EpochChange.Cutoff]) -> [EpochChange.Cutoff] {
        let removed = Set(removed)
        return candidates.filter { removed.contains($0.node) }
            .map { EpochChange.Cutoff(origin: $0.origin, node: $0.node, seq: min($0.seq, WireReader.madeCountLimit)) }
    }
}

/// An origin and the node key it runs as: what a cut-off is kept by (a member id is believed to
/// run as a node key only where it is pinned to it, `SessionCore.syncCutoffs`).
public struct CutoffKey: Hashable, Sendable {
    public var origin: MemberID
    public var node: [UInt8]
    public init(origin: MemberID, node: [UInt8]) { self.origin = origin; self.node = node }
}
