/// The chunk-transfer scheduler of the journal (pure): every member fetches every live attachment
/// from whoever holds its chunks.
///
/// Guarantees:
/// - requests go rarest-first (fewest live holders offering the chunk), ties broken at random, at
///   most `window` chunks in flight per peer, spread over the holders with the most free window;
/// - the uploader offers each peer only its share of the chunks it has not sent to anyone yet, so
///   it sends each chunk once before any twice (super-seeding); the share of a peer that has not
///   told what it holds of the attachment, or was sent no chunk never sent before for
///   `reofferAfter` (it asks for none: its store is full, or it will not), goes to the next peer
///   that takes its share, and while none does every peer that told is offered them all; a chunk it sent whose receiver
///   then left, or that a peer still lacks after `reofferAfter`, is offered again; requesters ask
///   the uploader only for chunks no other member offers;
/// - a request unanswered after `requestTimeout`, or answered with a chunk that fails its hash,
///   is asked of another holder (never again of the peer that sent a bad chunk); near the end
///   (every missing chunk already requested) each missing chunk is also asked of a second holder;
/// - requests stay within a byte budget (`tick(now:storeBudget:)`): what is held here plus what is
///   asked for never passes it, and attachments left waiting for it are named (`waitingForStore`);
/// - a peer counts as another copy of a chunk for hand-off (`onlyHere`) only once it has served
///   that chunk to this member and the copy verified: its `have` alone is a claim, which decides
///   what to fetch from whom and the attachment's state, never what is safe to drop.
public struct Swarm: Sendable {
    public struct Settings: Sendable {
        /// Chunks in flight per peer. Requests go out as each chunk arrives, so 3 (768 KiB)
        /// keeps a loopback link busy while bounding the bulk bytes a message can queue behind
        /// (see BENCHMARKS.md, "latency during a 100 MiB attachment").
        public var window = 3
        public var requestTimeout = 4.0
        public var reofferAfter = 3.0
        public init() {}
    }

    public struct Request: Sendable, Equatable {
        public let peer: MemberID
        public let id: String
        public let index: Int
    }

    /// What a member knows of one attachment.
    struct Transfer: Sendable {
        let chunkCount: Int
        let uploader: MemberID
        /// Bytes a (full) sealed chunk takes in the store: what a request or a held chunk costs.
        let chunkBytes: Int
        var have: Bitfield
        let addedAt: Double
        /// Taken up from before a restart (`Journal.recall`): settled only a while after peers are back.
        var recalled = false
        /// Per peer: what it holds, and what it offers us.
        var peerHave: [MemberID: Bitfield] = [:]
        var peerOffer: [MemberID: Bitfield] = [:]
        /// Per peer: the chunks it served this member that verified (proven copies).
        var proven: [MemberID: Bitfield] = [:]
        /// chunk → (peer, when) of requests in flight.
        var outstanding: [Int: [(peer: MemberID, at: Double)]] = [:]
        /// Chunks admitted and being written here (`admitted` until `chunkArrived`): they count
        /// against the store budget and are asked of nobody, however long the write takes and
        /// whoever leaves meanwhile (unlike a request, no timeout or departure frees them).
        var writing: Bitfield
        var bad: Set<[UInt64]> = []

        func isBad(_ index: Int, from peer: MemberID) -> Bool { !bad.isEmpty && bad.contains([UInt64(index), peer.raw]) }
        /// Uploader side: chunk → (member it was first sent to, when).
        var served: [Int: (peer: MemberID, at: Double)] = [:]
        /// Uploader side, per peer: when it first told what it holds, and when it was last sent a
        /// chunk never sent before (`takesShare`).
        var toldAt: [MemberID: Double] = [:]
        var lastFirstSend: [MemberID: Double] = [:]

        /// Whether `peer` still takes its share of the chunks never sent (uploader side): it told
        /// what it holds, and was sent a chunk nobody had been sent, or told, less than `within`
        /// ago. One that asks for none (its store is full, or it will not; asking again for a
        /// chunk sent before does not count) holds no chunk back from the others.
        func takesShare(_ peer: MemberID, now: Double, within: Double) -> Bool {
            guard let told = toldAt[peer] else { return false }
            return now - max(told, lastFirstSend[peer] ?? told) < within
        }
    }

    public let local: MemberID
    public let settings: Settings
    private var transfers: [String: Transfer] = [:]
    private var live: Set<MemberID> = []
    /// When the live set last became non-empty (a restarted member's peers are back).
    private var peersSince = -Double.infinity
    private var rng: SWIMRandom
    /// Attachments with chunks some holder offers that the last `tick` did not ask for because
    /// the store budget was spent.
    public private(set) var waitingForStore: Set<String> = []

    public init(local: MemberID, seed: UInt64, settings: Settings = Settings()) {
        self.local = local
        self.settings = settings
        rng = SWIMRandom(seed: seed)
    }

    // MARK: attachments and peers

    /// Starts tracking an attachment. Until the uploader's `have` says otherwise it is presumed to
    /// hold every chunk (it announced the attachment), so nothing looks unavailable too early.
    /// `chunkBytes`: what one sealed chunk takes in the store (0: not counted against a budget).
    /// `recalled`: known from before a restart (see `isSettled`).
    public mutating func add(id: String, chunkCount: Int, chunkBytes: Int = 0, uploader: MemberID, haveAll: Bool, now: Double, recalled: Bool = false) {
        guard transfers[id] == nil else { return }
        var t = Transfer(chunkCount: chunkCount, uploader: uploader, chunkBytes: max(0, chunkBytes), have: Bitfield(count: chunkCount, full: haveAll), addedAt: now, writing: Bitfield(count: chunkCount))
        t.recalled = recalled
        if uploader != local && live.contains(uploader) { t.peerHave[uploader] = Bitfield(count: chunkCount, full: true) }
        transfers[id] = t
    }

    /// Whether every live peer has told what it holds of `id`, or `settle` seconds have passed since
    /// this member learned of it: before that, a chunk without a known holder is not yet a verdict.
    /// An attachment known from before a restart counts from when peers were back (the member is
    /// alone at first, which says nothing: until it has had a peer, it is never settled, so never
    /// `unavailable`), and is settled by its peers' word only once it has some.
    public func isSettled(_ id: String, now: Double, settle: Double = 3) -> Bool {
        guard let t = transfers[id] else { return true }
        // Recalled while this member has had no peer since its restart: nothing to judge by yet.
        if t.recalled && !peersSince.isFinite { return false }
        let since = t.recalled ? max(t.addedAt, peersSince) : t.addedAt
        if now - since >= settle { return true }
        // No live peer (yet) has told nothing: only the clock settles then. (Every live peer having
        // told was true of an empty set, so a member that learned of an attachment before its live
        // peers were handed to the swarm read it `unavailable` at once; `attach.get` failed fast.)
        return !live.isEmpty && live.allSatisfy { t.peerHave[$0] != nil }
    }

    public mutating func remove(id: String) { transfers[id] = nil }

    /// The attachments being tracked, in id order.
    public var ids: [String] { transfers.keys.sorted() }

    public func have(_ id: String) -> Bitfield? { transfers[id]?.have }

    /// The live members other than this one; what others held or were asked for is dropped.
    /// `now`: when, if known (a restarted member's attachments settle from when peers are back).
    public mutating func setPeers(_ peers: Set<MemberID>, now: Double? = nil) {
        let live = peers.subtracting([local])
        if let now, self.live.isEmpty, !live.isEmpty { peersSince = now }
        self.live = live
        for (id, var t) in transfers {
            t.peerHave = t.peerHave.filter { live.contains($0.key) }
            t.peerOffer = t.peerOffer.filter { live.contains($0.key) }
            t.toldAt = t.toldAt.filter { live.contains($0.key) }
            t.lastFirstSend = t.lastFirstSend.filter { live.contains($0.key) }
            t.proven = t.proven.filter { live.contains($0.key) }
            for (index, asks) in t.outstanding {
                let kept = asks.filter { live.contains($0.peer) }
                t.outstanding[index] = kept.isEmpty ? nil : kept
            }
            transfers[id] = t
        }
    }

    /// A peer told what it holds and what it offers us. Returns whether this is the first of its
    /// `have`s for `id` kept here (since it was last live here); one from a peer that is not live
    /// here, for an attachment not known here, or of the wrong size is dropped (false).
    @discardableResult
    public mutating func receiveHave(_ peer: MemberID, id: String, have: Bitfield, offer: Bitfield, now: Double) -> Bool {
        guard live.contains(peer), var t = transfers[id], have.count == t.chunkCount, offer.count == t.chunkCount else { return false }
        let first = t.peerHave[peer] == nil
        if first && t.uploader == local { t.toldAt[peer] = now }
        t.peerHave[peer] = have
        t.peerOffer[peer] = offer
        for (index, asks) in t.outstanding where !offer[index] && asks.contains(where: { $0.peer == peer }) {
            let kept = asks.filter { $0.peer != peer }
            t.outstanding[index] = kept.isEmpty ? nil : kept
        }
        transfers[id] = t
        return first
    }

    /// A chunk held here turned out to be missing or corrupt on disk: fetch it again.
    public mutating func lost(id: String, index: Int) { transfers[id]?.have[index] = false }

    // MARK: chunks

    /// A chunk arrived; `valid` says whether it matched the manifest hash. Returns whether to store it.
    public mutating func chunkArrived(id: String, index: Int, from peer: MemberID, valid: Bool) -> Bool {
        guard var t = transfers[id], index >= 0, index < t.chunkCount else { return false }
        if !valid {
            t.bad.insert([UInt64(index), peer.raw])
            t.outstanding[index] = t.outstanding[index]?.filter { $0.peer != peer }
            if t.outstanding[index]?.isEmpty ?? false { t.outstanding[index] = nil }
            transfers[id] = t
            return false
        }
        let isNew = !t.have[index]
        t.have[index] = true
        t.writing[index] = false
        t.outstanding[index] = nil
        if live.contains(peer) { t.proven[peer, default: Bitfield(count: t.chunkCount)][index] = true }
        transfers[id] = t
        return isNew
    }

    /// A chunk that arrived intact was admitted and is being written: until it arrives here
    /// (`chunkArrived`) it is `writing`, so its bytes count against the store budget once and it
    /// is asked of nobody, however long the write takes (a loaded machine) and whoever leaves
    /// meanwhile. Its requests' timers start again now: they hold their peers' window slots while
    /// the write runs, so a link is not asked for more chunks than it can store
    /// (`LinkSession.chunkTasksPerLink`) and its reader never waits with messages behind.
    public mutating func admitted(id: String, index: Int, now: Double) {
        guard var t = transfers[id], index >= 0, index < t.chunkCount else { return }
        t.outstanding[index] = t.outstanding[index]?.map { ($0.peer, now) }
        t.writing[index] = true
        transfers[id] = t
    }

    /// This member sent chunk `index` to `peer` (for super-seeding).
    public mutating func served(id: String, index: Int, to peer: MemberID, now: Double) {
        guard transfers[id]?.uploader == local, transfers[id]?.served[index] == nil else { return }
        transfers[id]?.served[index] = (peer, now)
        if live.contains(peer) { transfers[id]?.lastFirstSend[peer] = now }
    }

    /// What this member offers `peer`: everything it holds, except that the uploader, while some
    /// chunks were never sent, offers each peer only its share of those.
    public func offer(_ id: String, to peer: MemberID, now: Double) -> Bitfield? {
        offers(id, to: [peer], now: now)[0]
    }

    /// `offer` to each of `peers`, in their order; the uploader's shares are worked out once for all.
    public func offers(_ id: String, to peers: [MemberID], now: Double) -> [Bitfield?] {
        guard let t = transfers[id] else { return peers.map { _ in nil } }
        guard t.uploader == local else { return peers.map { _ in t.have } }
        let ranked = live.sorted()
        // A share whose peer has not told what it holds of the attachment (it may not know of it
        // yet: its journal entry can be held back there), or takes no more of it (`takesShare`),
        // goes to the next peer in member order that does, so no chunk waits for one slow peer
        // while every other member lacks it. Before any peer has told, each keeps its own; when
        // peers told but none takes its share any more, every chunk never sent is offered to
        // every peer that told (the first it is sent to takes shares again), so no share is
        // handed back to a peer that asks for none.
        let takes = ranked.map { t.takesShare($0, now: now, within: settings.reofferAfter) }
        var sharer = Array(ranked.indices)
        if var next = takes.firstIndex(of: true) {
            // From the last rank down: the first rank at or after k (wrapping round) that takes.
            for k in ranked.indices.reversed() {
                if takes[k] { next = k }
                sharer[k] = next
            }
        }
        let noShares = !takes.contains(true) && !t.toldAt.isEmpty
        return peers.map { peer in
            guard let rank = ranked.firstIndex(of: peer) else { return t.have }
            var offer = Bitfield(count: t.chunkCount)
            let peerHave = t.peerHave[peer]
            for index in 0..<t.chunkCount where t.have[index] {
                if let sent = t.served[index] {
                    // Sent once already: offered again to a peer that still lacks it once its first
                    // receiver left, or `reofferAfter` passed (the swarm may be unable to supply it —
                    // e.g. every copy it has is bad).
                    let lacks = !(peerHave?[index] ?? false)
                    if lacks && (!live.contains(sent.peer) || now - sent.at >= settings.reofferAfter) { offer[index] = true }
                } else if noShares ? t.toldAt[peer] != nil : sharer[index % ranked.count] == rank {
                    offer[index] = true
                }
            }
            return offer
        }
    }

    /// Whether `peer` has told this member it holds every chunk of `id`.
    public func holdsAll(_ id: String, peer: MemberID) -> Bool { transfers[id]?.peerHave[peer]?.isFull ?? false }

    /// Bytes the chunks held here take (a last, shorter chunk counted as a full one).
    public var storedBytes: Int { transfers.values.reduce(0) { $0 + $1.have.setCount * $1.chunkBytes } }

    /// Bytes the chunks asked for (each request counted) and those being written (once) will take.
    public var requestedBytes: Int {
        transfers.values.reduce(0) { total, t in
            let asked = t.outstanding.reduce(0) { $0 + (t.writing[$1.key] ? 0 : $1.value.count) }
            return total + (asked + t.writing.setCount) * t.chunkBytes
        }
    }

    /// What one chunk of `id` costs the store.
    public func chunkBytes(_ id: String) -> Int { transfers[id]?.chunkBytes ?? 0 }

    /// Whether chunk `index` of `id` is asked of someone now (its bytes are already counted).
    public func isRequested(_ id: String, _ index: Int) -> Bool { transfers[id]?.outstanding[index] != nil }

    /// Whether chunk `index` of `id` was admitted and is being written here.
    public func isWriting(_ id: String, _ index: Int) -> Bool { transfers[id]?.writing[index] ?? false }

    /// Requests to send now, spending at most `storeBudget` bytes of chunks on them (what the
    /// store may still take beyond what it holds and what is already asked for).
    ///
    /// Called as every chunk arrives, so it costs little per call: holders are counted a byte of
    /// each peer's offer at a time, chunks are visited rarest first with ties drawn at random only
    /// as far as they are visited, and the visit stops once no holder has a free window slot (no
    /// later chunk could be asked of anyone) while the budget still covers a chunk.
    public mutating func tick(now: Double, storeBudget: Int = .max) -> [Request] {
        var requests: [Request] = []
        var budget = storeBudget
        waitingForStore = []
        for id in transfers.keys.sorted() {
            guard let full = transfers[id]?.have.isFull, !full, var t = transfers.removeValue(forKey: id) else { continue }
            defer { transfers[id] = t }
            for (index, asks) in t.outstanding {
                let fresh = asks.filter { now - $0.at < settings.requestTimeout }
                t.outstanding[index] = fresh.isEmpty ? nil : fresh
            }
            var load: [MemberID: Int] = [:]
            for asks in t.outstanding.values { for ask in asks { load[ask.peer, default: 0] += 1 } }
            // Missing chunks by how many holders offer them (and did not send a bad copy).
            var holders = [Int](repeating: 0, count: t.chunkCount)
            var freeSlots = 0
            for (peer, offer) in t.peerOffer {
                freeSlots += max(0, settings.window - (load[peer] ?? 0))
                for (byte, bits) in offer.bytes.enumerated() {
                    var wanted = bits & ~t.have.bytes[byte] & ~t.writing.bytes[byte]
                    while wanted != 0 {
                        let index = byte * 8 + wanted.trailingZeroBitCount
                        wanted &= wanted - 1
                        if !t.isBad(index, from: peer) { holders[index] += 1 }
                    }
                }
            }
            guard freeSlots > 0 || t.chunkBytes > budget else { continue }
            var missing = 0, unrequested = 0, rarest = Int.max, commonest = 0
            for (index, count) in holders.enumerated() where count > 0 {
                missing += 1
                if t.outstanding[index] == nil { unrequested += 1 }
                rarest = min(rarest, count); commonest = max(commonest, count)
            }
            guard missing > 0 else { continue }
            let endgame = unrequested == 0
            // Chunks by availability: levels[a - rarest] holds the candidates with `a` holders.
            var levels = [[Int]](repeating: [], count: commonest - rarest + 1)
            for (index, count) in holders.enumerated() where count > 0 && (endgame || t.outstanding[index] == nil) {
                levels[count - rarest].append(index)
            }
            visit: for var level in levels {
                for k in level.indices {
                    // Once no holder has a free slot, no later chunk can be asked of anyone; with
                    // the budget short, the next chunk still names the attachment as waiting.
                    if freeSlots == 0 && t.chunkBytes <= budget { break visit }
                    // A random pick among the chunks of this availability not visited yet.
                    let pick = k + Int(rng.next() % UInt64(level.count - k))
                    level.swapAt(k, pick)
                    let index = level[k]
                    let asked = Set(t.outstanding[index]?.map(\.peer) ?? [])
                    if endgame && asked.count >= 2 { continue }
                    guard t.chunkBytes <= budget else {
                        waitingForStore.insert(id)
                        break visit
                    }
                    // The holder with the most free window (then by id, for determinism). The uploader
                    // is asked only when no other member offers the chunk, even a busy one: it then
                    // sends each chunk about once, and the others spread it.
                    var best: (peer: MemberID, rank: (Int, UInt64))?
                    var othersOffer = false
                    var uploaderFree = false
                    for (peer, offer) in t.peerOffer where offer[index] && !t.isBad(index, from: peer) {
                        if peer != t.uploader { othersOffer = true }
                        let busy = load[peer] ?? 0
                        guard !asked.contains(peer), busy < settings.window else { continue }
                        if peer == t.uploader {
                            uploaderFree = true
                            continue
                        }
                        let rank = (busy, peer.raw)
                        if best.map({ rank < $0.rank }) ?? true { best = (peer, rank) }
                    }
                    guard let peer = best?.peer ?? (uploaderFree && !othersOffer ? t.uploader : nil) else { continue }
                    load[peer, default: 0] += 1
                    freeSlots -= 1
                    budget -= t.chunkBytes
                    t.outstanding[index, default: []].append((peer, now))
                    requests.append(Request(peer: peer, id: id, index: index))
                }
            }
        }
        return requests
    }

    // MARK: state

    /// Live members holding each chunk, this one included, not counting a peer whose copy of that
    /// chunk failed its hash here (so a chunk whose only copies are damaged is unavailable).
    public func holderCounts(_ id: String) -> [Int]? {
        guard let t = transfers[id] else { return nil }
        var counts = (0..<t.chunkCount).map { t.have[$0] ? 1 : 0 }
        for (peer, have) in t.peerHave {
            for index in 0..<t.chunkCount where have[index] && !t.isBad(index, from: peer) { counts[index] += 1 }
        }
        return counts
    }

    /// The fewest live holders any chunk has, counted up to 2 (as `holderCounts`); nil when the
    /// attachment has no chunks here. Two complete holders with no damaged copy reported answer
    /// at once: the journal asks this every tick for every attachment, and counting every chunk of
    /// every peer costs chunks × members each time.
    public func fewestHolders(_ id: String) -> Int? {
        guard let t = transfers[id], t.chunkCount > 0 else { return nil }
        if t.bad.isEmpty {
            var complete = t.have.isFull ? 1 : 0
            for have in t.peerHave.values where have.isFull {
                complete += 1
                if complete >= 2 { return 2 }
            }
        }
        return min(2, holderCounts(id)?.min() ?? 0)
    }

    /// Live members that hold every chunk, this one included.
    public func completeHolders(_ id: String) -> [MemberID] {
        guard let t = transfers[id] else { return [] }
        return (t.have.isFull ? [local] : []) + t.peerHave.filter { $0.value.isFull }.map(\.key).sorted()
    }

    /// Chunks this member holds that no other live member is known to hold (what a graceful leave
    /// hands off): known only from a peer that served this member the chunk intact and still says
    /// it holds it. `claimed`: how many of them some peer merely says it holds.
    public func onlyHere(_ id: String) -> (chunks: [Int], claimed: Int) {
        guard let t = transfers[id] else { return ([], 0) }
        var chunks: [Int] = [], claimed = 0
        for index in 0..<t.chunkCount where t.have[index] {
            var proven = false, said = false
            for (peer, have) in t.peerHave where have[index] {
                said = true
                if t.proven[peer]?[index] ?? false { proven = true; break }
            }
            guard !proven else { continue }
            chunks.append(index)
            if said { claimed += 1 }
        }
        return (chunks, claimed)
    }
}
