import HuddleCrypto

/// The state of one attachment, as `attach.list` and attachment events name it.
public enum AttachmentState: String, Sendable, Equatable {
    /// In the journal; some chunk may have a single live holder (or none yet known).
    case announced
    /// Every chunk is held by at least two live members.
    case replicated
    /// Some chunk has no live holder, and every live peer has said what it holds (or the settle
    /// time passed): nobody can fetch it.
    case unavailable
    /// Removed from the journal.
    case removed
}

/// What an `attachment` event says happened (CONTROL.md's `change`).
public enum AttachmentChange: String, Sendable, Equatable {
    case added, removed, progress, complete, replicated, unavailable
}

/// A member's journal (pure): the attachment set every member agrees on, this member's part in
/// fetching and serving it (the `Swarm`), what it told each peer, and the attachment states.
///
/// Guarantees:
/// - an attachment is added once, from a valid manifest with a 32-byte key, and removed once;
///   a removed attachment never comes back (its id stays in the table as `.removed`);
/// - each peer hears this member's `have`/`offer` for an attachment when they change, when the
///   peer's own first `have` for it arrives here while it still fetches (it may have dropped ours),
///   and again every `haveRefresh` seconds while that peer is still fetching (a `have` that reached
///   it before the journal entry was dropped there), never more often;
/// - the state follows one rule (`state(of:now:)`), and `replicated`/`unavailable` are emitted
///   once per change into them; `complete` is emitted once; `progress` at most every 0.25 s;
/// - the hand-off plan names each chunk no other member is proven to hold (`Swarm.onlyHere`)
///   exactly once, spread round-robin over the remaining peers in member order; a chunk only
///   claimed elsewhere is handed off too, and counted (`refusals[.unverifiedHolder]`);
/// - the store never passes `storeLimitBytes` by what this member fetches: chunks are asked for
///   only within it, a chunk that arrives unasked (a hand-off) is stored only within it, and an
///   attachment whose fetching stops for it is reported once (`.storeFull`) until it goes on;
/// - at most `servesPerPeer` chunk reads are in flight for one peer (`admitServe`, `served`).
public struct Journal: Sendable {
    /// One attachment as this member knows it.
    public struct Record: Sendable {
        public let manifest: Manifest
        public let key: [UInt8]
        public internal(set) var state: AttachmentState = .announced
        var completeEmitted = false
        var lastProgressAt = -1.0
        public var removed: Bool { state == .removed }
    }

    /// What the journal asks of the shell.
    public enum Effect: Sendable, Equatable {
        case emit(AttachmentChange, id: String)
        case sendHave(to: MemberID, id: String, have: Bitfield, offer: Bitfield)
        case requestChunk(from: MemberID, id: String, index: Int)
        /// The attachment was removed: delete what the store holds of it.
        case deleteStored(id: String)
        /// Something about the attachment changed: whoever waits on it should look again.
        case changed(id: String)
        /// Fetching the attachment stopped: its next chunk would pass the store limit.
        case storeFull(id: String)
        /// The first refusal of this reason by the journal (later ones are only counted): log it.
        case refused(Refusal)
    }

    /// Chunk reads one peer may have in flight here (`admitServe` until `served`/`serveEnded`):
    /// 4 MiB of 256 KiB chunks, above a requester's window of 3 per attachment for several
    /// attachments at once; requests beyond it are refused and asked again after a timeout.
    public static let servesPerPeer = 16
    /// The default store limit (`huddle run --store-limit`).
    public static let defaultStoreLimitBytes = 2 << 30

    /// How often an unchanged `have` is repeated to a peer that is still fetching.
    public static let haveRefresh = 1.0
    /// Least time between two `progress` events of one attachment.
    public static let progressInterval = 0.25

    public let local: MemberID
    public internal(set) var records: [String: Record] = [:]
    /// Moves on whenever `memory` would differ (an attachment added or removed, `complete` reported):
    /// the shell writes the memory only then.
    public internal(set) var revision: UInt64 = 0
    public internal(set) var swarm: Swarm
    /// What was last sent to a peer and when; `fullSeenAt`: when the peer was last seen holding
    /// every chunk since then (it needs no refresh; cleared by its next `have` that is not full).
    private struct SentHave: Sendable { var have: Bitfield; var offer: Bitfield; var at: Double; var fullSeenAt: Double? }
    /// Per attachment and peer: what was last sent, and when (by attachment first: a tick looks
    /// each attachment up once, then only member ids).
    private var sentHave: [String: [MemberID: SentHave]] = [:]
    /// Most bytes of chunks this member stores (its own attachments and what it fetches).
    public let storeLimitBytes: Int
    /// Attachments whose fetching stopped at the store limit (reported once each).
    public private(set) var stoppedByStore: Set<String> = []
    /// Per peer, chunk reads admitted and not yet served.
    private var serving: [MemberID: Int] = [:]
    /// What the journal refused, by reason.
    public private(set) var refusals = RefusalCounts()

    public init(local: MemberID, seed: UInt64, settings: Swarm.Settings = Swarm.Settings(), storeLimitBytes: Int = Self.defaultStoreLimitBytes) {
        self.local = local
        self.storeLimitBytes = storeLimitBytes
        swarm = Swarm(local: local, seed: seed, settings: settings)
    }

    // MARK: the attachment set

    /// The live attachments as journal entries, in id order (what a joiner is sent).
    public var entries: [JournalEntry] {
        records.keys.sorted().compactMap { id in
            guard let r = records[id], !r.removed else { return nil }
            return .add(r.manifest, key: r.key)
        }
    }

    /// Applies an add or remove, from a delivered broadcast, a sponsor's journal, or this member.
    public mutating func apply(_ entry: JournalEntry, now: Double) -> [Effect] {
        switch entry {
        case let .add(manifest, key):
            let id = manifest.id
            guard records[id] == nil, manifest.commits(to: key), manifest.isValid() else { return [] }
            records[id] = Record(manifest: manifest, key: key)
            revision &+= 1
            swarm.add(id: id, chunkCount: manifest.chunkCount, chunkBytes: Int(manifest.chunkSize) + AEAD.tagLength, uploader: manifest.uploader,
                      haveAll: manifest.uploader == local, now: now)
            var out: [Effect] = [.emit(.added, id: id)]
            if swarm.have(id)?.isFull ?? false { out += markComplete(id) }
            return out + [.changed(id: id)]
        case let .remove(id):
            guard var r = records[id], !r.removed else { return [] }
            r.state = .removed
            records[id] = r
            revision &+= 1
            swarm.remove(id: id)
            stoppedByStore.remove(id)
            sentHave[id] = nil
            return [.deleteStored(id: id), .emit(.removed, id: id), .changed(id: id)]
        }
    }

    // MARK: peers

    /// The live members (this one may be among them): the swarm's holders and hand-off targets.
    public mutating func setPeers(_ live: Set<MemberID>, now: Double? = nil) {
        swarm.setPeers(live, now: now)
        sentHave = sentHave.compactMapValues { sent in
            let kept = sent.filter { live.contains($0.key) }
            return kept.isEmpty ? nil : kept
        }
    }

    /// The link to `peer` closed: what it was told is forgotten, so it hears everything again;
    /// its chunk reads no longer count.
    public mutating func linkDown(_ peer: MemberID) {
        for id in Array(sentHave.keys) {
            sentHave[id]?[peer] = nil
            if sentHave[id]?.isEmpty ?? false { sentHave[id] = nil }
        }
        serving[peer] = nil
    }

    /// A peer's `have`/`offer` for an attachment. The first one kept from a peer that still
    /// fetches is answered with this member's own at the next tick, not after `haveRefresh`: the
    /// peer may have dropped this member's earlier `have` (it came before the peer knew the
    /// attachment, or knew this member as live), and until it hears one it asks nothing of it.
    public mutating func receiveHave(_ peer: MemberID, id: String, have: Bitfield, offer: Bitfield, now: Double) {
        let first = swarm.receiveHave(peer, id: id, have: have, offer: offer, now: now)
        guard !have.isFull else { return }
        if first { sentHave[id]?[peer] = nil } else { sentHave[id]?[peer]?.fullSeenAt = nil }
    }

    // MARK: time

    /// Chunk requests due now (as each chunk arrives, and on every tick), within the store limit;
    /// an attachment that stops at it is reported once (`.storeFull`), and again only after its
    /// fetching went on in between.
    public mutating func requests(now: Double) -> [Effect] {
        let budget = storeLimitBytes - storeUsedBytes
        var out = swarm.tick(now: now, storeBudget: budget).map { Effect.requestChunk(from: $0.peer, id: $0.id, index: $0.index) }
        let waiting = swarm.waitingForStore
        for id in waiting.subtracting(stoppedByStore).sorted() {
            out.append(.storeFull(id: id))
            out += refuse(.storeFull)
        }
        // One that asked for chunks again (room was made) is reported anew if it stops again.
        stoppedByStore = stoppedByStore.subtracting(out.compactMap { if case let .requestChunk(_, id, _) = $0 { id } else { nil } }).union(waiting)
        return out
    }

    /// Counts a refusal; the first of its reason becomes a `.refused` effect.
    private mutating func refuse(_ reason: Refusal) -> [Effect] {
        refusals.add(reason) ? [.refused(reason)] : []
    }

    /// Requests, `have`s to the linked live peers (in member order), and state changes.
    public mutating func tick(now: Double, linked: [MemberID]) -> [Effect] {
        var out = requests(now: now)
        for id in swarm.ids {
            guard let have = swarm.have(id) else { continue }
            var sent = sentHave.removeValue(forKey: id) ?? [:]
            for (peer, offer) in zip(linked, swarm.offers(id, to: linked, now: now)) {
                guard let offer else { continue }
                if let last = sent[peer], last.have == have, last.offer == offer {
                    if now - last.at < Self.haveRefresh { continue }
                    // A peer holding every chunk needs no refresh; it is looked up again after
                    // `haveRefresh`, not at every tick (a lookup by attachment id per peer per tick),
                    // and at once after a `have` of its that is not full (`receiveHave`).
                    if let seen = last.fullSeenAt, now - seen < Self.haveRefresh { continue }
                    if swarm.holdsAll(id, peer: peer) { sent[peer]?.fullSeenAt = now; continue }
                }
                sent[peer] = SentHave(have: have, offer: offer, at: now, fullSeenAt: nil)
                out.append(.sendHave(to: peer, id: id, have: have, offer: offer))
            }
            if !sent.isEmpty { sentHave[id] = sent }
            let state = state(of: id, now: now)
            if let r = records[id], r.state != state {
                records[id]?.state = state
                if state == .replicated || state == .unavailable { out.append(.emit(state == .replicated ? .replicated : .unavailable, id: id)) }
                out.append(.changed(id: id))
            }
        }
        return out
    }

    /// The rule: removed; else unavailable once some chunk has no live holder and the swarm has
    /// settled (every live peer told what it holds, or a few seconds passed); replicated when every
    /// chunk has two live holders; announced otherwise.
    public func state(of id: String, now: Double) -> AttachmentState {
        guard let r = records[id], !r.removed else { return .removed }
        switch swarm.fewestHolders(id) {
        case 0?: return swarm.isSettled(id, now: now) ? .unavailable : .announced
        case 1?: return .announced
        default: return .replicated
        }
    }

    // MARK: chunks

    /// Whether this member holds chunk `index` of a live attachment (and may serve it).
    public func holds(_ id: String, _ index: Int) -> Bool {
        guard let r = records[id], !r.removed, index >= 0, index < r.manifest.chunkCount else { return false }
        return swarm.have(id)?[index] ?? false
    }

    /// Chunk reads in flight for `peer` (admitted, not yet served or ended).
    public func serves(to peer: MemberID) -> Int { serving[peer] ?? 0 }

    /// Whether `peer`'s request for chunk `index` of `id` is served: this member must hold it, and
    /// `peer` may have at most `servesPerPeer` reads in flight (refused and counted beyond). An
    /// admitted read ends with `served` (the chunk was queued for `peer`) or `serveEnded`.
    public mutating func admitServe(_ id: String, _ index: Int, to peer: MemberID) -> (admitted: Bool, effects: [Effect]) {
        guard holds(id, index) else { return (false, []) }
        guard serves(to: peer) < Self.servesPerPeer else { return (false, refuse(.chunkRequests)) }
        serving[peer, default: 0] += 1
        return (true, [])
    }

    /// An admitted chunk read for `peer` ended without sending it (missing, removed, no link).
    public mutating func serveEnded(to peer: MemberID) {
        let left = serves(to: peer) - 1
        serving[peer] = left > 0 ? left : nil
    }

    /// This member sent chunk `index` to `peer` (ends an admitted read).
    public mutating func served(_ id: String, _ index: Int, to peer: MemberID, now: Double) {
        serveEnded(to: peer)
        swarm.served(id: id, index: index, to: peer, now: now)
    }

    /// Bytes of chunks the store holds or that are on their way to it (asked for, or admitted and
    /// being written): what the store limit is held against.
    public var storeUsedBytes: Int { swarm.storedBytes + swarm.requestedBytes }

    /// Whether `bytes` more fit the store limit beside what it holds or is to hold: the one store
    /// budget, for what this member fetches and for what it adds (`SessionCore.storeFits`).
    public func storeFits(_ bytes: Int) -> Bool { bytes >= 0 && bytes <= storeLimitBytes - storeUsedBytes }

    /// Whether a chunk that arrived intact and is new here may be stored: one that was asked for
    /// is already within the store limit; one that came unasked (a hand-off, or an answer after
    /// its request timed out) must fit it, else it is refused and counted; a second copy of one
    /// being written is dropped. An admitted chunk counts as being written until it arrives
    /// (`chunkArrived`, `Swarm.admitted`), so chunks written at once (a link stores several
    /// concurrently) never pass the limit together, nor does a write slower than a request
    /// timeout, nor one whose sender left meanwhile.
    public mutating func admitChunk(_ id: String, _ index: Int, now: Double) -> (admitted: Bool, effects: [Effect]) {
        guard !swarm.isWriting(id, index) else { return (false, []) }
        if !swarm.isRequested(id, index) {
            guard storeFits(swarm.chunkBytes(id)) else { return (false, refuse(.storeFull)) }
        }
        swarm.admitted(id: id, index: index, now: now)
        return (true, [])
    }

    /// A chunk arrived from `peer`, `valid` when its hash matched the manifest. True when it is
    /// new here and must be stored (then `stored` or `lost` follows).
    public mutating func chunkArrived(_ id: String, _ index: Int, from peer: MemberID, valid: Bool) -> Bool {
        guard let r = records[id], !r.removed, index >= 0, index < r.manifest.chunkCount else { return false }
        return swarm.chunkArrived(id: id, index: index, from: peer, valid: valid)
    }

    /// A chunk was stored: `complete` once all are, else `progress` at most every `progressInterval`.
    public mutating func stored(_ id: String, now: Double) -> [Effect] {
        guard let r = records[id], !r.removed else { return [] }
        if swarm.have(id)?.isFull ?? false { return markComplete(id) }
        guard now - r.lastProgressAt >= Self.progressInterval else { return [] }
        records[id]?.lastProgressAt = now
        return [.emit(.progress, id: id)]
    }

    /// A chunk found in the store from an earlier run of this member, its hash checked against
    /// the manifest (CONTROL.md, Restart): held again without being fetched.
    /// Reported before the restart, no `progress` is emitted for it again (only `complete`, if
    /// it was not reported yet).
    public mutating func recovered(_ id: String, _ index: Int, now: Double) -> [Effect] {
        guard chunkArrived(id, index, from: local, valid: true) else { return [] }
        return swarm.have(id)?.isFull ?? false ? markComplete(id) : []
    }

    /// A chunk this member held is gone or damaged: it is fetched again.
    public mutating func lost(_ id: String, _ index: Int) { swarm.lost(id: id, index: index) }

    private mutating func markComplete(_ id: String) -> [Effect] {
        guard records[id]?.completeEmitted == false else { return [] }
        records[id]?.completeEmitted = true
        revision &+= 1
        return [.emit(.complete, id: id), .changed(id: id)]
    }

    // MARK: hand-off

    /// What a graceful leave pushes: each chunk no other member is proven to hold, to `peers`
    /// (sorted here) in turn. Chunks pushed although some peer says it holds them are counted
    /// (`.unverifiedHolder`): a `have` alone never spares a chunk its hand-off.
    public mutating func handOffPlan(to peers: [MemberID]) -> (plan: [(peer: MemberID, id: String, index: Int)], effects: [Effect]) {
        let targets = peers.sorted()
        guard !targets.isEmpty else { return ([], []) }
        var plan: [(peer: MemberID, id: String, index: Int)] = []
        var claimed = 0
        for id in swarm.ids where !(records[id]?.removed ?? true) {
            let only = swarm.onlyHere(id)
            claimed += only.claimed
            for (n, index) in only.chunks.enumerated() { plan.append((targets[n % targets.count], id, index)) }
        }
        guard claimed > 0 else { return (plan, []) }
        let first = refusals.add(.unverifiedHolder, claimed)
        return (plan, first ? [.refused(.unverifiedHolder)] : [])
    }

    /// How many of the pushed chunks another live member now holds.
    public func handedOff(_ pushed: [(id: String, index: Int)]) -> Int {
        pushed.filter { (swarm.holderCounts($0.id)?[$0.index] ?? 0) >= 2 }.count
    }
}
