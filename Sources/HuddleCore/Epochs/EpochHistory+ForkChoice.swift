import HuddleCrypto

/// The fork choice: which branch of the kept changes the session follows (see "The winning
/// branch" in the note at the top of EpochHistory.swift). A pure function of the kept changes and
/// the equivocators they prove, so members holding the same changes choose the same head.
extension EpochHistory {
    /// What a subtree does to node keys: whom its changes hand a key to, and whom they remove.
    struct SubtreeEffect {
        var handed: Set<[UInt8]> = []
        var removed: Set<[UInt8]> = []
    }

    /// The winning branch, root first: from the root, at each epoch the winning child.
    func winningChain() -> [[UInt8]] {
        var cursor = root
        var path = [root]
        while let children = entries[cursor]?.children, !children.isEmpty {
            cursor = children.count == 1 ? children[0] : winner(among: children)
            path.append(cursor)
        }
        return path
    }

    /// The winning child among siblings: the lowest of (undoes a sibling's removal, made by an
    /// equivocator, hash). A child **undoes a sibling's removal** when its subtree hands a key to
    /// a node key that a sibling's subtree removes and that its own subtree does not remove (its
    /// maker counts: a maker is always on its own roster) — so a removal, once made, is never
    /// outrun by a sibling of an older change, and a member being removed cannot outrun its removal.
    func winner(among children: [[UInt8]]) -> [UInt8] {
        let effects = children.map(subtreeEffect)
        func rank(_ i: Int) -> (undoes: Bool, equivocator: Bool) {
            let mine = effects[i]
            let undoes = effects.indices.contains { j in
                j != i && effects[j].removed.contains { mine.handed.contains($0) && !mine.removed.contains($0) }
            }
            let maker = entries[children[i]]?.makerNode ?? []
            return (undoes, equivocators.contains(maker))
        }
        let ranks = children.indices.map(rank)
        func key(_ r: (undoes: Bool, equivocator: Bool)) -> Int { (r.undoes ? 2 : 0) + (r.equivocator ? 1 : 0) }
        let best = ranks.map(key).min() ?? 0
        return children.indices.filter { key(ranks[$0]) == best }.map { children[$0] }.min(by: bytesPrecede) ?? children[0]
    }

    /// Every node key the changes of the subtree at `hash` hand a key to, and every one they remove.
    func subtreeEffect(_ hash: [UInt8]) -> SubtreeEffect {
        var out = SubtreeEffect()
        var stack = [hash]
        while let h = stack.popLast() {
            guard let entry = entries[h] else { continue }
            out.handed.formUnion(entry.roster ?? [])
            out.removed.formUnion(entry.removed)
            stack += entry.children
        }
        return out
    }
}
