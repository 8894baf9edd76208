import HuddleCrypto

// Epochs: how removal, rotation, concurrency and grace work (issue 21).
//
// A session lives through **epochs**. Epoch 0's session key is the one `huddle keygen` made; every
// **epoch change** (`EpochChange`) moves the session to a new random key, one epoch higher, handed
// to each node key of the new epoch's **roster** sealed to that node key (`SealedBox`), signed by
// the member that made it. Every subkey (link PSK, datagram key, chunk header key) is derived from
// the current epoch's key, so a node key that is not handed the new key can no longer link, open a
// datagram or read a chunk header made after the change.
//
// - **Rotation** (`rekey`) makes a change that removes nobody: routine, and forward secrecy for the
//   whole session (a key that leaks later opens nothing sent after the next rotation).
// - **Removal** (`remove`) makes a change whose roster leaves the removed node keys out and names
//   them in `removed`. A removed node key is refused for good, with every key it ever held: its
//   changes, its handshakes with an old key, a grant to it.
//
// Invariants (issue 33: they hold whatever a hostile member that holds the key signs):
//
// 1. **Removals are monotone.** A node key removed by any change this member ever kept stays
//    removed (`removedNodes`), whichever branch wins: the removals of a change are remembered when
//    the change is forgotten (past the grace or `maxChanges`) or dropped (an equivocator's third
//    change on one parent), up to `maxRemembered` node keys. A removed node key is never handed a
//    key by a change this member makes, never admitted, never granted, and a change that hands it
//    a key loses the fork choice to one that removes it (rule 3).
// 2. **Every roster is checked against its parent's.** A new roster is a subset of the parent's
//    roster and the node keys **proven** to this member (`prove`: the node keys of its member table,
//    whose records each node key signed itself, and of its links, whose handshake proved the node
//    key), minus every node key removed before it; a change adding a node key not proven yet waits
//    (with the changes waiting for their parent, at most `maxWaiting`) until it is, so a key a
//    member planted without ever running it as a member is handed nothing. And a new roster holds
//    every member of the parent's roster that the change does not remove, explicitly, in `removed`
//    (`epochRosterOmitsMember`): a rekey hands the key to everyone the previous epoch did. Where the
//    parent's roster is not known (epoch 0, or the epoch this member started from), this member is
//    on it when it holds its key: a roster of its maker alone locks nobody out — every honest member
//    refuses it. (Leaving members out takes a removal, which is signed, seen and counted: without
//    admins any member may remove any other; see Authority.) A roster member stays on every roster
//    after it until it is removed, offline or not; past the grace its old key opens nothing anyway.
// 3. **History is a tree, the session follows one branch** (`winningChain`). Changes name their parent
//    by hash. Two members making epoch n+1 at once make siblings. Every member picks the same branch
//    from the same set of changes, level by level from the oldest epoch it remembers: among the
//    children of the chosen epoch, the winner is the lowest of (undoes a removal, made by an
//    equivocator, change hash). A child **undoes a removal** when its subtree hands a key to a node
//    key (its maker included: a maker is on its own roster) that a sibling's subtree removes and its
//    own does not. So a removal, once made, is never outrun by a sibling of an older change, however
//    low its hash, and a member being removed cannot outrun its removal by forking from an older
//    epoch. Two members removing each other both undo a removal: the lowest hash wins, and the lost
//    removal is re-issued (below); both end up removed.
// 4. **An equivocating maker is excluded.** A maker that signs two changes on one parent has
//    equivocated (honest software never does: it makes changes on its head only). Both changes are
//    kept as the evidence (`equivocations`, `EpochEquivocation.verify` checks it from the two
//    changes alone); of more, only the two lowest hashes (the others are dropped, their removals
//    remembered). The maker counts as removed, by itself, everywhere that holds the pair, and its
//    changes lose to any sibling not made by an equivocator. Nothing an honest member built on an
//    equivocator's change is lost: it stays kept, its removals count.
// 5. **A removal is never lost.** A node key removed on a losing branch (or by its own
//    equivocation) may still be on the winning branch's roster, so the removal is **re-issued** on
//    top of the head: by the maker of the losing change that removed it, if that maker is on the
//    head's roster (else by the lowest node key on it), at once; by every member on the roster
//    after `reissueDelay` if no re-issue arrived by then. Every change a member makes also carries
//    every removal still missing from the winning branch.
// 6. **Old keys only by the winning branch.** A member holding an older key within the grace is
//    let in (`admission`, `.behind`) only when a roster of the winning branch names it: the roster
//    of the epoch where the key's branch meets the winning branch, or of the winning epoch after
//    it. A losing branch's roster vouches for nobody.
// 7. **Changes are rate-limited per maker.** A member keeps at most `changesPerMaker` (8) changes of
//    one maker per `changeWindow` (60 s) of its own clock; more wait (with the changes waiting for
//    their parent) until the window has room, and a member makes no more itself
//    (`EpochError.rateLimited`; a due re-issue waits for room). Together with rule 4 (two changes
//    per maker and parent at most), one member can neither make every other rewrite its key file
//    and hand out keys at will, nor spend the `maxChanges` history fast. Waiting is not refusing:
//    every member keeps the same changes in the end, whatever their clocks.
//
// Rules 1, 3, 4 and 5 are a function of the changes kept, so they hold whatever order changes
// arrive in; rule 2's proof and rule 7's window depend on what this member knows when, so they
// delay a change, never refuse it for good.
//
// - **Nobody stranded.** A member that was offline through rotations still holds an older key. The
//   handshake tries the current key, then the keys of earlier epochs within the grace
//   (`handshakeKeys`); a member holding such a key is let in by invariant 6, and anyone else with
//   an old key is refused; a key older than the grace opens nothing (the handshake fails at its
//   first message, as a wrong key does). The member let in is handed over the winning changes after
//   its epoch, and a grant (`EpochGrant`) of the current key sealed to it when the current roster
//   leaves it out (`handover`).
// - **Grace.** An epoch's key is kept, and accepted, for `grace` (7 days) after the epoch ended
//   here; changes on top of an epoch that ended longer ago are refused as stale (the history is
//   final after the grace), and the oldest epochs are forgotten past `maxChanges`. What a member
//   remembers is bounded: at most `maxChanges` changes (each at most `EpochChange.maxRoster`
//   recipients; two per maker and parent), `maxWaiting` changes waiting for their parent or for a
//   proof, `maxRemembered` removed node keys beyond the changes that removed them (and as many
//   equivocators), `maxEvidence` equivocation pairs, and when it last saw each node key of the
//   head's roster.
// - **Authority.** By default every member on an epoch's roster may make the next epoch (everyone
//   holding the key is equal). With `admins` set, only those node keys may. Without admins a hostile
//   member can remove honest ones — its change is signed, so everyone sees who did it, and a removal
//   it races against its own removal removes both (rule 3) — and a member that only holds the key
//   file of epoch 0 may make the first change (epoch 0 has no signed roster; rule 2 still makes it
//   hand the key to every member that receives it). It cannot lock the others out (rule 2), undo a
//   removal (rules 1 and 3), fork at will (rule 4) or flood changes (rule 7).
// - **What a removed member keeps.** Everything it already received: the keys of the epochs it was
//   on, the messages, attachments and chunk keys sent under them, and whatever it captured on the
//   wire in those epochs. Nothing made after the change that removed it is readable to it: new
//   messages, datagrams and attachment keys travel only under the new epoch's subkeys.
// - **A member restarted from its key file** knows its epoch's key and head but not the rosters
//   before it: it accepts the first change on top of its epoch from any maker (it checks the
//   signature, the key check, its own sealed key, that it is on the roster and that every node key
//   on it is proven), and converges with the others as it hears their changes. It makes no change
//   before it has seen the change that made its epoch (`EpochError.rosterUnknown`): the next roster
//   must carry that one's. Every peer hands that change over when a link comes up (`learnRoot`).

/// The epoch core: the pure rules of the session's epoch history — which epoch changes to accept,
/// which branch the session follows when changes are concurrent, which key this member holds now,
/// who is removed, who may come back with an old key, and when a lost removal must be re-issued.
/// No I/O, no clock (`now` is passed in), randomness only from the generator it is given.
///
/// Guarantees: members that hold the same set of changes have the same head and the same removed
/// node keys, whatever order the changes came in; every member on the head's roster holds the
/// head's key (it opens it from the change, or from a grant); a removed node key stays removed
/// whichever branch wins, is never handed a key by a change this member makes, never admitted,
/// never granted, and a change handing it a key loses to its removal; no change that leaves a
/// member of its parent's roster out without removing it, or adds a node key not proven here, is
/// kept; an equivocating maker is removed by its own evidence; everything it keeps is bounded by
/// `EpochSettings`. See the invariants in the note at the top of this file.
public struct EpochHistory: Sendable {
    /// One epoch this member knows: the root (the epoch it started from, or the oldest it still
    /// remembers), or one made by a kept change.
    struct Entry: Sendable {
        var change: EpochChange?
        var epoch: UInt64
        var parent: [UInt8]?
        /// Nil for a root whose roster is not known (epoch 0, or an epoch loaded from a key file).
        var roster: Set<[UInt8]>?
        var removed: [[UInt8]]
        var makerNode: [UInt8]?
        var children: [[UInt8]] = []
    }

    public let identity: Identity
    public let local: MemberID
    public let settings: EpochSettings
    public let sessionID: [UInt8]

    var entries: [[UInt8]: Entry] = [:]
    var root: [UInt8]
    /// Removals in the forgotten history below the root: removed for every change still kept.
    var rootRemoved: Set<[UInt8]> = []
    /// Node keys removed by changes no longer kept (forgotten, or on dropped branches), oldest first.
    var rememberedRemovals: [(node: [UInt8], by: [UInt8])] = []
    /// The tip of the winning branch: the current epoch.
    public private(set) var head: [UInt8]
    /// The winning branch, root first.
    public private(set) var chain: [[UInt8]] = []
    /// Every node key removed anywhere (kept changes, remembered removals), with who removed it.
    public private(set) var removedNodes: [[UInt8]: [UInt8]] = [:]
    /// The keys this member holds, by head.
    var keys: [[UInt8]: SessionKey] = [:]
    /// When each epoch stopped being the head here (nil for the head).
    var endedAt: [[UInt8]: Double] = [:]
    /// Changes whose parent is not known yet, with their hashes, oldest first.
    var waiting: [(hash: [UInt8], change: EpochChange)] = []
    /// When this member last saw each node key (a member the caller named, or `observe`d).
    var lastSeen: [[UInt8]: Double] = [:]
    /// Since when a removal has been missing from the winning branch.
    public private(set) var pendingSince: Double?
    /// Heads whose key this member tried to open and could not (not tried again).
    var unopenable: Set<[UInt8]> = []
    /// When each maker's changes were kept here, within the last `changeWindow` (the rate limit).
    var madeAt: [[UInt8]: [Double]] = [:]
    /// Node keys proven to this member (`prove`): a new roster may add only these.
    var proven: Set<[UInt8]> = []
    /// Node keys that signed two changes on one parent: removed, by their own evidence, for good.
    public private(set) var equivocators: Set<[UInt8]> = []
    /// The evidence of the latest equivocations, oldest first (at most `EpochSettings.maxEvidence`).
    public private(set) var equivocations: [EpochEquivocation] = []

    /// Starts from the key this member holds (from its key file, or epoch 0's).
    public init(key: SessionKey, identity: Identity, local: MemberID, settings: EpochSettings = EpochSettings()) {
        self.identity = identity
        self.local = local
        self.settings = settings
        sessionID = key.sessionID
        root = key.head
        head = key.head
        chain = [key.head]
        entries[key.head] = Entry(change: nil, epoch: key.epoch, parent: nil, roster: nil, removed: [], makerNode: nil)
        keys[key.head] = key
    }

    // MARK: what the session core reads

    /// The current epoch's number.
    public var epoch: UInt64 { entries[head]?.epoch ?? 0 }

    /// The current epoch's key, when this member holds it (nil when removed or waiting for a grant).
    public var current: SessionKey? { keys[head] }

    /// The node key of this member.
    public var nodeKey: [UInt8] { identity.publicKey }

    /// Whether this member's node key is removed.
    public var isRemoved: Bool { removedNodes[nodeKey] != nil }

    /// The current epoch's roster (nil when this member started at this epoch and never saw it signed).
    public var roster: Set<[UInt8]>? { entries[head]?.roster }

    /// The change that made the current epoch (nil at the root).
    public var headChange: EpochChange? { entries[head]?.change }

    /// Every kept change, parent first (to hand a member whose history differs).
    public var changes: [EpochChange] {
        entries.sorted { $0.value.epoch != $1.value.epoch ? $0.value.epoch < $1.value.epoch : bytesPrecede($0.key, $1.key) }
            .compactMap(\.value.change)
    }

    /// The winning branch's changes after `ancestor` (after the root when `ancestor` is not on it).
    public func changes(after ancestor: [UInt8]) -> [EpochChange] {
        let start = chain.firstIndex(of: ancestor).map { $0 + 1 } ?? 1
        return chain.dropFirst(start).compactMap { entries[$0]?.change }
    }

    /// Notes that `node` was seen as a member now (linked, or alive in membership): its roster entry
    /// is carried into the next epoch for the grace after this.
    public mutating func observe(_ node: [UInt8], now: Double) {
        guard entries[head]?.roster?.contains(node) ?? true else { return }
        lastSeen[node] = max(lastSeen[node] ?? now, now)
    }

    // MARK: receiving changes

    /// Receives an epoch change from a peer (or from this member: `rekey` and `remove` use it).
    public mutating func receive(_ change: EpochChange, now: Double) -> EpochReceipt {
        guard change.session == sessionID else { return .refused(.epochOtherSession) }
        let hash = change.hash
        if hash == root, entries[root]?.change == nil, change.validate() == nil { return learnRoot(change, now: now) }
        if entries[hash] != nil || waiting.contains(where: { $0.hash == hash }) { return .duplicate }
        if let reason = change.validate() { return .refused(reason) }
        let before = (head: head, removed: isRemoved, key: current)
        guard entries[change.parent] != nil, isProven(change), withinRate(change.makerNode, now: now) else {
            if entries[change.parent] == nil, change.epoch <= entries[root]?.epoch ?? 0 { return .refused(.epochStale) }
            waiting.append((hash, change))
            if waiting.count > settings.maxWaiting { waiting.removeFirst(waiting.count - settings.maxWaiting) }
            return .waiting
        }
        if let reason = insert(change, hash: hash, now: now) { return .refused(reason) }
        releaseWaiting(now: now)
        settle(now: now)
        return receipt(before: before)
    }

    /// The change that made the root epoch (the one this member started from), which it knew only
    /// by its hash: now its roster, maker and removals are known too. Its hash is the root's, so it
    /// is the very change the key file named.
    mutating func learnRoot(_ change: EpochChange, now: Double) -> EpochReceipt {
        let before = (head: head, removed: isRemoved, key: current)
        entries[root]?.change = change
        entries[root]?.roster = Set(change.roster)
        entries[root]?.removed = change.removed
        entries[root]?.makerNode = change.makerNode
        settle(now: now)
        return receipt(before: before)
    }

    /// What changed for this member since `before`.
    func receipt(before: (head: [UInt8], removed: Bool, key: SessionKey?)) -> EpochReceipt {
        if isRemoved { return before.removed ? .recorded : .removed(by: removedNodes[nodeKey] ?? []) }
        guard head != before.head || current != before.key else { return .recorded }
        if let current { return .moved(current) }
        return .notHanded
    }

    /// Checks `change` against its (known) parent and keeps it; the reason when refused.
    mutating func insert(_ change: EpochChange, hash: [UInt8], now: Double) -> Refusal? {
        guard let parent = entries[change.parent] else { return .epochStale }
        // Epochs are counts (the decoder refuses any above 2^53 − 1): the next one cannot wrap.
        guard change.epoch == parent.epoch &+ 1 else { return .epochMalformed }
        if let ended = endedAt[change.parent], now - ended > settings.grace { return .epochStale }
        let before = ancestryRemovals(of: change.parent)
        if before.contains(change.makerNode) { return .epochMakerRemoved }
        if let roster = parent.roster, !roster.contains(change.makerNode) { return .epochMakerNotOnRoster }
        if !settings.admins.isEmpty && !settings.admins.contains(change.makerNode) { return .epochNotAdmin }
        if change.roster.contains(where: before.contains) { return .epochReaddsRemoved }
        if omitsParentMember(change, removedBefore: before) { return .epochRosterOmitsMember }
        let twins = parent.children.filter { entries[$0]?.makerNode == change.makerNode }
        if let twin = twins.first.flatMap({ entries[$0]?.change }) { noteEquivocation(twin, change) }
        // Two changes by one maker on one parent are the evidence; of more, the two lowest hashes are kept.
        if twins.count >= 2, let highest = twins.max(by: bytesPrecede) {
            guard bytesPrecede(hash, highest) else {
                for node in change.removed { rememberedRemovals.append((node, change.makerNode)) }
                return .epochEquivocation
            }
            drop(subtree: highest)
        }
        entries[hash] = Entry(change: change, epoch: change.epoch, parent: change.parent, roster: Set(change.roster),
                              removed: change.removed, makerNode: change.makerNode)
        madeAt[change.makerNode, default: []].append(now)
        entries[change.parent]?.children.append(hash)
        return nil
    }

    /// Keeps every waiting change whose parent is now known (and theirs, in turn).
    mutating func releaseWaiting(now: Double) {
        var progress = true
        while progress {
            progress = false
            for (i, (hash, change)) in waiting.enumerated() where entries[change.parent] != nil && isProven(change) && withinRate(change.makerNode, now: now) {
                waiting.remove(at: i)
                _ = insert(change, hash: hash, now: now)
                progress = true
                break
            }
        }
    }

    /// Removes `hash` and everything after it (an equivocator's third change on one parent, replaced
    /// by a lower one), remembering every removal in it: a removal once made is never undone.
    mutating func drop(subtree hash: [UInt8]) {
        if let parent = entries[hash]?.parent { entries[parent]?.children.removeAll { $0 == hash } }
        forget(subtree: hash)
    }

    /// When `maker` may have its next change kept here (`now` or earlier when it may now).
    func nextAllowed(_ maker: [UInt8], now: Double) -> Double {
        let recent = (madeAt[maker] ?? []).filter { now - $0 < settings.changeWindow }
        guard recent.count >= settings.changesPerMaker, let oldest = recent.min() else { return now }
        return oldest + settings.changeWindow
    }

    /// Whether `maker` may have a change kept here now (fewer than `changesPerMaker` in the window).
    func withinRate(_ maker: [UInt8], now: Double) -> Bool { nextAllowed(maker, now: now) <= now }

    /// Records that `a` and `b` prove their maker equivocated (once per maker; the evidence kept is bounded).
    mutating func noteEquivocation(_ a: EpochChange, _ b: EpochChange) {
        guard let evidence = EpochEquivocation(a, b, session: sessionID), !equivocators.contains(evidence.maker),
              equivocators.count < settings.maxRemembered else { return }
        equivocators.insert(evidence.maker)
        equivocations.append(evidence)
        if equivocations.count > settings.maxEvidence { equivocations.removeFirst(equivocations.count - settings.maxEvidence) }
    }

    /// Node keys removed on the way from the forgotten past to `hash` (inclusive).
    func ancestryRemovals(of hash: [UInt8]) -> Set<[UInt8]> {
        var out = rootRemoved
        var cursor: [UInt8]? = hash
        while let h = cursor, let entry = entries[h] {
            out.formUnion(entry.removed)
            cursor = entry.parent
        }
        return out
    }

    // MARK: the winning branch

    /// Recomputes the head, the removed node keys, the keys this member holds and the pending
    /// re-issue after the kept changes changed; then forgets what is past the bounds.
    mutating func settle(now: Double) {
        chain = winningChain()
        head = chain.last ?? root
        collectRemovals()
        openKeys()
        for hash in entries.keys where hash != head && endedAt[hash] == nil { endedAt[hash] = now }
        endedAt[head] = nil
        if let roster = entries[head]?.roster {
            for node in roster where lastSeen[node] == nil { lastSeen[node] = now }
        }
        pendingSince = pendingRemovals.isEmpty ? nil : (pendingSince ?? now)
        prune(now: now)
    }

    /// `removedNodes`: every kept change's removals, the forgotten ones, and those below the root.
    mutating func collectRemovals() {
        var all: [[UInt8]: [UInt8]] = [:]
        for (node, by) in rememberedRemovals { all[node] = by }
        for node in rootRemoved where all[node] == nil { all[node] = [] }
        // An equivocator is removed by its own evidence.
        for node in equivocators { all[node] = node }
        // Who removed a node key: the winning branch's change when there is one, else the oldest
        // (then lowest-hash) change that did.
        let onChain = Set(chain)
        let others = entries.filter { !onChain.contains($0.key) }
            .sorted { $0.value.epoch != $1.value.epoch ? $0.value.epoch < $1.value.epoch : bytesPrecede($0.key, $1.key) }
        for entry in chain.compactMap({ entries[$0] }) + others.map(\.value) {
            for node in entry.removed where all[node] == nil || all[node] == [] { all[node] = entry.makerNode ?? [] }
        }
        removedNodes = all
    }

    /// Opens this member's key of every epoch on the winning branch that it does not hold yet.
    mutating func openKeys() {
        for hash in chain where keys[hash] == nil && !unopenable.contains(hash) {
            guard let change = entries[hash]?.change else { continue }
            if let key = change.openKey(with: identity) { keys[hash] = key } else { unopenable.insert(hash) }
        }
    }

    // MARK: bounds

    /// Forgets epochs that ended longer than the grace ago (and the oldest past `maxChanges`),
    /// keys older than the grace, node keys not seen for the grace, and excess remembered removals.
    mutating func prune(now: Double) {
        while chain.count > 1 {
            let expired = endedAt[root].map { now - $0 > settings.grace } ?? false
            guard expired || entries.count > settings.maxChanges else { break }
            forgetRoot(newRoot: chain[1])
        }
        for (hash, ended) in endedAt where now - ended > settings.grace { keys[hash] = nil }
        for (node, seen) in lastSeen where now - seen > settings.grace { lastSeen[node] = nil }
        let seenBound = 2 * EpochChange.maxRoster
        if lastSeen.count > seenBound {
            for (node, _) in lastSeen.sorted(by: { $0.value < $1.value }).prefix(lastSeen.count - seenBound) { lastSeen[node] = nil }
        }
        unopenable = unopenable.filter { entries[$0] != nil }
        madeAt = madeAt.compactMapValues { times in
            let recent = times.filter { now - $0 < settings.changeWindow }
            return recent.isEmpty ? nil : recent
        }
        if rememberedRemovals.count > settings.maxRemembered { rememberedRemovals.removeFirst(rememberedRemovals.count - settings.maxRemembered) }
    }

    /// Makes `newRoot` (the root's child on the winning branch) the root: the old root and every
    /// other branch from it are forgotten, their removals remembered.
    mutating func forgetRoot(newRoot: [UInt8]) {
        guard let old = entries[root] else { return }
        for child in old.children where child != newRoot { forget(subtree: child) }
        rootRemoved.formUnion(old.removed)
        entries[root] = nil
        keys[root] = nil
        endedAt[root] = nil
        entries[newRoot]?.parent = nil
        root = newRoot
        chain.removeFirst()
    }

    /// Drops a losing branch, remembering who it removed.
    mutating func forget(subtree hash: [UInt8]) {
        guard let entry = entries[hash] else { return }
        for node in entry.removed { rememberedRemovals.append((node, entry.makerNode ?? [])) }
        for child in entry.children { forget(subtree: child) }
        entries[hash] = nil
        keys[hash] = nil
        endedAt[hash] = nil
    }
}
