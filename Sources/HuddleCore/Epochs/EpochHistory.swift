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
//   changes, its handshakes with an old key, a grant to it. The roster is the members the maker
//   knows, plus the previous roster's node keys seen within the grace (so a member that is merely
//   offline is still handed the key), minus everyone removed. *Seen* means named by the caller (a
//   member in the member table, whose record its own node key signed) or linked (`observe`): a
//   node key that is only on a roster — never a member here, never linked — is not carried, so
//   keys a hostile member planted on its roster (no node runs them) go with its removal instead of
//   being handed every new key for the grace. (A member reaped from this member's table before it
//   joined or restarted is left off too; back within the grace it is granted the key on linking.)
// - **History is a tree, the session follows one branch.** Changes name their parent by hash. Two
//   members making epoch n+1 at once make siblings. Every member picks the same branch from the
//   same set of changes, level by level from the oldest epoch it remembers: among the children of
//   the chosen epoch, the lowest of (excluded, undoes a removal, change hash) wins (`winner(among:)`):
//   - a child is **excluded** when its maker is removed anywhere in a sibling's subtree (a member
//     being removed cannot outrun its removal, even by forking from an older epoch) or is an
//     equivocator;
//   - a child **undoes a removal** when its subtree hands a key (a roster names it) to a node key
//     that a sibling's subtree removes and its own subtree does not: a removal, once made, is never
//     outrun by a sibling of an older change, whoever signs the sibling (a puppet of the removed
//     member on the old roster can sign one; its hash, ground low, used to win); likewise when its
//     subtree keeps as admin a node key that a sibling's subtree demotes (drops from the admin set)
//     and its own does not (a demoted admin that removed its demoter in a sibling used to win at
//     every member, being excluded without undoing anything). A demotion on a losing branch is
//     re-issued on the head like a removal (`pendingDemotions`).
//   The winning branch's tip is the **head**: the current epoch.
// - **Equivocation.** Honest software makes at most one change per (parent, maker): a member makes a
//   change only on its head, and its head moves to that change at once. Two by one maker on one
//   parent are the **evidence** (`EpochEquivocation`) that its node key forks the history: both are
//   kept (so every member that is handed the changes holds the evidence and checks it for itself),
//   the maker counts as removed, by itself, and its changes are excluded from every fork choice; a
//   third or later change on that parent is kept only if its hash is lower than one of the two
//   (which then goes, with its subtree), so what one maker can make members keep stays bounded.
// - **A removal is never lost.** Removals count wherever they are (`removedNodes`: every kept
//   change's, on any branch, and every removal in a subtree that was dropped or forgotten), so a node
//   key removed on a losing branch is refused at once. Its key
//   may still be on the winning branch's roster, though, so the removal is **re-issued** on top of
//   the head: by the maker of the losing change that removed it, if that maker is on the head's
//   roster (else by the lowest node key on it), at once; by every member on the roster after
//   `reissueDelay` if no re-issue arrived by then. Every change a member makes also carries every
//   removal still missing from the winning branch.
// - **Nobody stranded.** A member that was offline through rotations still holds an older key. The
//   handshake tries the current key, then the keys of earlier epochs within the grace
//   (`handshakeKeys`); a member holding such a key is let in (`admission`) if its node key was on
//   that epoch's roster, or the next one's, and was never removed; anyone else with an old key is
//   refused, and a key older than the grace opens nothing (the handshake fails at its first
//   message, as a wrong key does). A node key that linked here with an epoch's key while that
//   epoch was the head (`vouch`: a joiner) is let in with that key too, until a removal follows
//   that epoch: a rotation made at the same moment by a maker that did not know it yet leaves it
//   off the roster, and it is granted the key. The member let in is handed over the winning
//   changes after its epoch, and a grant (`EpochGrant`) of the current key sealed to it when the current roster
//   leaves it out (`handover`).
// - **Grace.** An epoch's key is kept, and accepted, for `grace` (7 days) after the epoch ended
//   here; changes on top of an epoch that ended longer ago are refused as stale (the history is
//   final after the grace), and the oldest epochs are forgotten past `maxChanges`. What a member
//   remembers is bounded: at most `maxChanges` changes (each at most `EpochChange.maxRoster`
//   recipients), `maxWaiting` changes waiting for their parent, `maxRemembered` removed node keys
//   beyond the changes that removed them, and when it last saw each node key of the head's roster.
// - **Authority.** By default every member on an epoch's roster may make the next epoch (everyone
//   holding the key is equal). A session made with admins (`huddle keygen --admin`, issue 33) has
//   an **admin set** per epoch, part of its signed state: epoch 0's is the key's (`SessionKey.admins`,
//   bound into the session id and every subkey), every later epoch's is the one its change carries
//   signed (`EpochChange.admins`). Only an admin of the parent epoch may make a change, and only
//   it may carry another admin set than the parent's (add or drop admins, itself included), never
//   an empty one; a session without admins never gets some. Members that disagree about an epoch's
//   admin set hold different subkeys of its key: they cannot link, so they cannot fork one session.
//   A member dropped from the admin set counts, for the fork choice, like a removed one: a sibling
//   it makes on an older epoch is excluded (it cannot outrun its demotion, as a removed member
//   cannot outrun its removal). Without admins a hostile member can remove honest ones — its
//   change is signed, so everyone sees who did it — and a member that only holds the key file of
//   epoch 0 may make the first change (epoch 0 has no signed roster).
// - **What a removed member keeps.** Everything it already received: the keys of the epochs it was
//   on, the messages, attachments and chunk keys sent under them, and whatever it captured on the
//   wire in those epochs. Nothing made after the change that removed it is readable to it: new
//   messages, datagrams and attachment keys travel only under the new epoch's subkeys.
// - **A member restarted from its key file** knows its epoch's key and head but not the rosters
//   before it: it accepts the first change on top of its epoch from any maker (it checks the
//   signature, the key check and its own sealed key), and converges with the others as it hears
//   their changes.

/// The epoch core: the pure rules of the session's epoch history — which epoch changes to accept,
/// which branch the session follows when changes are concurrent, which key this member holds now,
/// who is removed, who may come back with an old key, and when a lost removal must be re-issued.
/// No I/O, no clock (`now` is passed in), randomness only from the generator it is given.
///
/// Guarantees: members that hold the same set of changes have the same head and the same removed
/// node keys, whatever order the changes came in; every member on the head's roster holds the
/// head's key (it opens it from the change, or from a grant); a removed node key is never handed a
/// key by a change this member makes, never admitted, never granted; everything it keeps is bounded
/// by `EpochSettings`. See the note at the top of this file for the rules.
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
        var makerNodeKey: [UInt8]?
        /// The epoch's admin set (sorted; empty: every member may make the next epoch).
        var admins: [[UInt8]] = []
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
    /// Every node key a kept change, on any branch, dropped from its parent's admin set.
    public private(set) var demotedNodes: Set<[UInt8]> = []
    /// The keys this member holds, by head.
    var keys: [[UInt8]: SessionKey] = [:]
    /// When each epoch stopped being the head here (nil for the head).
    var endedAt: [[UInt8]: Double] = [:]
    /// Changes whose parent is not known yet, with their hashes, oldest first.
    var waiting: [(hash: [UInt8], change: EpochChange)] = []
    /// When this member last saw each node key (a member the caller named, or `observe`d).
    var lastSeen: [[UInt8]: Double] = [:]
    /// Node keys that linked here proving an epoch's key while that epoch was the head (`vouch`), by
    /// head: this member let them in as current members of that epoch, so it hands them the key of
    /// the next one when its roster leaves them out (a maker that changed epochs at the same moment
    /// did not know them yet). At most `EpochChange.maxRoster` per epoch, forgotten with the epoch.
    var vouched: [[UInt8]: Set<[UInt8]>] = [:]
    /// No counter-change or re-issue is tried again before this (set when one could not be made,
    /// or was made and did not settle it): a failure does not make the session core spin.
    var retryAt: Double = -.infinity
    /// Since when a removal has been missing from the winning branch.
    public private(set) var pendingSince: Double?
    /// The head this member is locked out of without its key (`lockout`), and since when.
    var lockedOutAt: (head: [UInt8], since: Double)?
    /// Since when this member has been locked out of the head without its key (`lockout`).
    public var lockedOutSince: Double? { lockedOutAt?.since }
    /// Heads whose key this member tried to open and could not (not tried again).
    var unopenable: Set<[UInt8]> = []
    /// Node keys proven to have signed two changes on one parent (at most `maxRemembered`).
    public private(set) var equivocators: Set<[UInt8]> = []
    /// The evidence of the latest equivocations (at most `EpochSettings.maxEvidence`), oldest first.
    public private(set) var equivocations: [EpochEquivocation] = []
    /// Per origin of a removed node key, its cut-off: the highest any kept change (not an
    /// equivocator's) or remembered one gives (`EpochHistory+Cutoffs`).
    public internal(set) var cutoffs: [CutoffKey: UInt64] = [:]
    /// Cut-offs of changes no longer kept (at most `maxRemembered`).
    var rememberedCutoffs: [CutoffKey: UInt64] = [:]
    /// Changes above their maker's rate, kept aside until their release (wall-clock seconds),
    /// at most `maxWaiting` (`EpochHistory+Rate`).
    var delayed: [(hash: [UInt8], change: EpochChange, release: Double)] = []
    /// Seconds to add to `now` for the wall clock (seconds since 1970): what signed change times
    /// are read against. The session core sets it with its own (`SessionCore.setWallClock`).
    public var wallClockOffset: Double = 0

    /// Starts from the key this member holds (from its key file, or epoch 0's).
    public init(key: SessionKey, identity: Identity, local: MemberID, settings: EpochSettings = EpochSettings()) {
        self.identity = identity
        self.local = local
        self.settings = settings
        sessionID = key.sessionID
        root = key.head
        head = key.head
        chain = [key.head]
        entries[key.head] = Entry(change: nil, epoch: key.epoch, parent: nil, roster: nil, removed: [], makerNodeKey: nil, admins: key.admins)
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

    /// The current epoch's admin set (sorted; empty: the session has no admins, every member may).
    public var admins: [[UInt8]] { entries[head]?.admins ?? [] }

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

    /// Notes that `node` linked here proving the key of `keyHead` while it was the head: this member
    /// let it in as a current member of that epoch (see `vouched`).
    public mutating func vouch(_ node: [UInt8], holding keyHead: [UInt8]) {
        guard keyHead == head, removedNodes[node] == nil, (vouched[keyHead]?.count ?? 0) < EpochChange.maxRoster else { return }
        vouched[keyHead, default: []].insert(node)
    }

    // MARK: receiving changes

    /// Receives an epoch change from a peer (or from this member: `rekey` and `remove` use it).
    public mutating func receive(_ change: EpochChange, now: Double) -> EpochReceipt {
        guard change.session == sessionID else { return .refused(.epochOtherSession) }
        let hash = change.hash
        if entries[hash] != nil || waiting.contains(where: { $0.hash == hash }) || delayed.contains(where: { $0.hash == hash }) { return .duplicate }
        if let reason = change.validate() { return .refused(reason) }
        let before = (head: head, removed: isRemoved, key: current)
        guard entries[change.parent] != nil else {
            if change.epoch <= entries[root]?.epoch ?? 0 { return .refused(.epochStale) }
            waiting.append((hash, change))
            if waiting.count > settings.maxWaiting { waiting.removeFirst(waiting.count - settings.maxWaiting) }
            return .waiting
        }
        if let reason = insert(change, hash: hash, now: now) { return .refused(reason) }
        if entries[hash] == nil { return .waiting }  // above its maker's rate: delayed
        releaseWaiting(now: now)
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
        if before.contains(change.makerNodeKey) { return .epochMakerRemoved }
        if let roster = parent.roster, !roster.contains(change.makerNodeKey) { return .epochMakerNotOnRoster }
        // Admins (issue 33): the parent epoch's admin set decides who may make the change, and
        // whether it may carry another (never into or out of a session without admins).
        if !parent.admins.isEmpty && !parent.admins.contains(change.makerNodeKey) { return .epochNotAdmin }
        if change.admins != parent.admins && (parent.admins.isEmpty || change.admins.isEmpty) { return .epochAdminsChanged }
        if change.roster.contains(where: before.contains) { return .epochReaddsRemoved }
        // The maker's rate (`EpochHistory+Rate`): kept aside until its release when above the rate.
        let release = release(of: change)
        if release > now + wallClockOffset + settings.clockTolerance {
            delay(change, hash: hash, release: release)
            return nil
        }
        let twins = parent.children.filter { entries[$0]?.makerNodeKey == change.makerNodeKey }
        if let twin = twins.first.flatMap({ entries[$0]?.change }) { noteEquivocation(twin, change) }
        // Two changes by one maker on one parent are the evidence; of more, the two lowest hashes are kept.
        if twins.count >= 2, let highest = twins.max(by: bytesPrecede) {
            guard bytesPrecede(hash, highest) else { return .epochEquivocation }
            drop(subtree: highest)
        }
        entries[hash] = Entry(change: change, epoch: change.epoch, parent: change.parent, roster: Set(change.roster),
                              removed: change.removed, makerNodeKey: change.makerNodeKey, admins: change.admins)
        entries[change.parent]?.children.append(hash)
        return nil
    }

    /// Keeps every waiting change whose parent is now known (and theirs, in turn).
    mutating func releaseWaiting(now: Double) {
        var progress = true
        while progress {
            progress = false
            for (i, (hash, change)) in waiting.enumerated() where entries[change.parent] != nil {
                waiting.remove(at: i)
                _ = insert(change, hash: hash, now: now)
                progress = true
                break
            }
        }
    }

    /// Removes `hash` and everything after it (an equivocator's third change on one parent, replaced
    /// by a lower one), remembering every removal in it: a removal once made is never undone by
    /// dropping the change, or the honest descendants, that made it.
    mutating func drop(subtree hash: [UInt8]) {
        if let parent = entries[hash]?.parent { entries[parent]?.children.removeAll { $0 == hash } }
        forget(subtree: hash)
    }

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
        chooseHead()
        collectRemovals()
        collectDemotions()
        collectCutoffs()
        openKeys()
        for hash in entries.keys where hash != head && endedAt[hash] == nil { endedAt[hash] = now }
        endedAt[head] = nil
        pendingSince = pendingRemovals.isEmpty && pendingDemotions.isEmpty ? nil : (pendingSince ?? now)
        if lockout == nil || current != nil { lockedOutAt = nil } else if lockedOutAt?.head != head { lockedOutAt = (head, now) }
        prune(now: now)
    }

    /// Walks from the root, at each epoch taking the winning child (see the note at the top).
    mutating func chooseHead() {
        var cursor = root
        var path = [root]
        while let children = entries[cursor]?.children, !children.isEmpty {
            cursor = children.count == 1 ? children[0] : winner(among: children)
            path.append(cursor)
        }
        head = cursor
        chain = path
    }

    /// What a subtree does to node keys: whom its changes hand a key to, whom they remove, and
    /// which admins they drop from the admin set.
    struct SubtreeEffect {
        var handed: Set<[UInt8]> = []
        var removed: Set<[UInt8]> = []
        var demoted: Set<[UInt8]> = []
        /// Every node key an admin set of the subtree's changes names.
        var admins: Set<[UInt8]> = []
    }

    /// The winning child among siblings: the lowest of (excluded, undoes a removal, hash), as the
    /// note at the top says. A pure function of the kept changes and the equivocators they prove.
    func winner(among children: [[UInt8]]) -> [UInt8] {
        let effects = children.map(subtreeEffect)
        func rank(_ i: Int) -> Int {
            let mine = effects[i]
            let maker = entries[children[i]]?.makerNodeKey ?? []
            let others = effects.indices.filter { $0 != i }
            let excluded = equivocators.contains(maker) || others.contains { effects[$0].removed.contains(maker) || effects[$0].demoted.contains(maker) }
            let undoes = others.contains { j in
                effects[j].removed.contains { mine.handed.contains($0) && !mine.removed.contains($0) }
                    || effects[j].demoted.contains { mine.admins.contains($0) && !mine.demoted.contains($0) }
            }
            return (excluded ? 2 : 0) + (undoes ? 1 : 0)
        }
        let ranks = children.indices.map(rank)
        let best = ranks.min() ?? 0
        return children.indices.filter { ranks[$0] == best }.map { children[$0] }.min(by: bytesPrecede) ?? children[0]
    }

    /// Every node key the changes of the subtree at `hash` hand a key to, and every one they remove.
    func subtreeEffect(_ hash: [UInt8]) -> SubtreeEffect {
        var out = SubtreeEffect()
        var stack = [hash]
        while let h = stack.popLast() {
            guard let entry = entries[h] else { continue }
            out.handed.formUnion(entry.roster ?? [])
            out.removed.formUnion(entry.removed)
            out.admins.formUnion(entry.admins)
            out.demoted.formUnion(demotions(by: entry))
            stack += entry.children
        }
        return out
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
            for node in entry.removed where all[node] == nil || all[node] == [] { all[node] = entry.makerNodeKey ?? [] }
        }
        removedNodes = all
    }

    /// The admins `entry`'s change dropped from its parent's admin set (none when the parent is not kept).
    func demotions(by entry: Entry) -> Set<[UInt8]> {
        guard let parent = entry.parent.flatMap({ entries[$0] }) else { return [] }
        return Set(parent.admins).subtracting(entry.admins)
    }

    /// `demotedNodes`: the node keys every kept change (any branch) dropped from its parent's admins.
    mutating func collectDemotions() {
        demotedNodes = entries.values.reduce(into: []) { $0.formUnion(demotions(by: $1)) }
    }

    /// The node keys some change on the way from the root to `hash` dropped from the admin set.
    func ancestryDemotions(of hash: [UInt8]) -> Set<[UInt8]> {
        var out: Set<[UInt8]> = []
        var cursor: [UInt8]? = hash
        while let h = cursor, let entry = entries[h] {
            out.formUnion(demotions(by: entry))
            cursor = entry.parent
        }
        return out
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
        vouched = vouched.filter { entries[$0.key] != nil }
        trimRememberedRemovals()
    }

    /// Makes `newRoot` (the root's child on the winning branch) the root: the old root and every
    /// other branch from it are forgotten, their removals remembered.
    mutating func forgetRoot(newRoot: [UInt8]) {
        guard let old = entries[root] else { return }
        rememberCutoffs(of: old)
        for child in old.children where child != newRoot { forget(subtree: child) }
        rootRemoved.formUnion(old.removed)
        entries[root] = nil
        keys[root] = nil
        endedAt[root] = nil
        entries[newRoot]?.parent = nil
        root = newRoot
        chain.removeFirst()
    }

    /// Keeps at most `maxRemembered` remembered removals: an equivocator's go first (what it removed
    /// counts for nothing more than the removals an equivocator's changes can flood in), then the
    /// oldest. Honest removals are not flushed by the drops of an equivocator's changes.
    mutating func trimRememberedRemovals() {
        var excess = rememberedRemovals.count - settings.maxRemembered
        guard excess > 0 else { return }
        rememberedRemovals.removeAll { entry in
            guard excess > 0, equivocators.contains(entry.by) else { return false }
            excess -= 1
            return true
        }
        if excess > 0 { rememberedRemovals.removeFirst(excess) }
    }

    /// Drops a losing branch, remembering who it removed (each node key once).
    mutating func forget(subtree hash: [UInt8]) {
        guard let entry = entries[hash] else { return }
        rememberCutoffs(of: entry)
        let by = entry.makerNodeKey ?? []
        for node in entry.removed {
            // Each node key once; a remover that is not an equivocator replaces one that is (those
            // go first when the list is trimmed, and the removal must not go with them).
            if let i = rememberedRemovals.firstIndex(where: { $0.node == node }) {
                let known = rememberedRemovals[i].by
                if (known.isEmpty || equivocators.contains(known)) && !by.isEmpty && !equivocators.contains(by) { rememberedRemovals[i].by = by }
            } else {
                rememberedRemovals.append((node, by))
            }
        }
        for child in entry.children { forget(subtree: child) }
        entries[hash] = nil
        keys[hash] = nil
        endedAt[hash] = nil
    }
}
