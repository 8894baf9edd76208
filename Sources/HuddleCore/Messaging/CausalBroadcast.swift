/// Causal, reliable broadcast and causally ordered directed sends (pure; the shell signs, verifies
/// and carries the messages).
///
/// Guarantees, for members that stay in the session:
/// - every broadcast is delivered exactly once, from each origin in `seq` order starting right
///   after `baseline[origin]`, and only after every dependency it carries (`deps`: what its origin
///   had delivered before sending it) — so a reply never arrives before what it answers;
/// - a gap is repaired from any member that still stores the message (not only its origin, which
///   may have crashed): members exchange digests of what they delivered and what they store, and
///   a member whose deliveries from an origin stall for `repairDelay` while a peer shows more asks
///   that peer for the seqs it lacks;
/// - a member stores what it delivered until every current member has acknowledged it in a digest,
///   and for a member that failed (not one that left) until it acknowledges too, for
///   `retainForFailed` and within `retainBytes`: a member failed by a partition that heals, or
///   paused, repairs what was sent without it; held-back and stored messages are bounded, and what
///   is refused for lack of room is repaired later, never lost;
/// - what is held back from one origin is bounded in bytes (`holdbackBytesPerOrigin`), so a hostile
///   origin that sends gaps fills only its own budget: past it, held broadcasts above a new
///   message's seq make room for it (they are repaired later), a directed message (which has no
///   repair) takes the place of held broadcasts, and whatever still does not fit is refused and
///   counted (`refusals[.heldBytes]`); the next message in line is always taken;
/// - a dependency on an origin this member has not heard of yet (its messages and the membership
///   news of it are still on their way) holds the message until the origin is known, until it
///   is known to be gone, or for at most `unknownOriginWait`;
/// - an origin with a **cut-off** (a removed member, `setCutoff`; issue 33) has its broadcasts
///   delivered up to the cut-off and refused above it (`refusals[.afterRemoval]`), its directed
///   messages refused; a peer's digest never makes this member ask for what lies above it, and
///   a dependency above it counts as met once the cut-off is delivered.
public struct CausalBroadcast: Sendable {
    public struct Settings: Sendable {
        /// How long deliveries from an origin may stall, while a peer shows more, before a member
        /// asks for the gap (messages in flight arrive by themselves within this time on a LAN).
        public var repairDelay: Double = 0.3
        /// How long a repair request may stay unanswered before it is sent again (to any peer
        /// ahead). A re-request asks only for what is still neither delivered nor held, so it can be
        /// short: at 1 s, 20 % loss of answers left some simulated members still repairing a
        /// sender's last messages 15 s after the sends ended.
        public var requestTimeout: Double = 0.5
        /// Most messages asked for in one request.
        public var requestRange: UInt64 = 512
        /// Most messages held back waiting for predecessors or dependencies.
        public var holdbackLimit = 50_000
        /// Most bytes (as `storedSize` counts them) held back from one origin. An honest origin
        /// has more held here only when this member lags it by that much with a gap below: then
        /// the excess is repaired in turn instead of waiting in memory.
        public var holdbackBytesPerOrigin = Self.defaultHoldbackBytesPerOrigin
        public static let defaultHoldbackBytesPerOrigin = 8 << 20
        /// Most messages held back from one origin (broadcasts and directed): a quarter of
        /// `holdbackLimit`, so no one origin takes the whole hold-back (50,000 one-byte messages
        /// above a gap used to fill it within the byte budget, and every send answered `busy`).
        public var holdbackCountPerOrigin = 12_500
        /// How long an origin's held-back messages may wait without a delivery from that origin
        /// before they are dropped (counted as `held_expired`): a broadcast is repaired later from
        /// any member that stores it, so only a gap nobody can fill (a hostile origin's) is lost.
        /// Held messages are also dropped once the origin has had some held for twice this without
        /// a pause: an origin that trickles one deliverable message a minute used to keep its
        /// held messages (up to `holdbackBytesPerOrigin`) for ever (issue 33). An honest origin's
        /// gap is repaired in seconds, so its hold-back empties long before.
        public var heldExpiry: Double = 60
        /// How long a live member may leave messages delivered here unacknowledged before it stops
        /// holding them in the store: past this it is a *laggard*, kept for only as a failed member
        /// is (within `retainBytes`), until it acknowledges what it was behind on. A member that
        /// links, reads and never acknowledges used to pin every message: the store filled and
        /// every send in the session answered `busy` for as long as it stayed. A laggard whose
        /// messages were dropped cannot repair them (`storedFrom` is past its clock).
        public var ackDeadline: Double = Self.defaultAckDeadline
        public static let defaultAckDeadline = 10.0
        /// Stored bytes at which the shell applies backpressure to new sends. Every member keeps
        /// a message until every member has acknowledged it, so while one origin streams, each
        /// member's store holds about what the origin's holds: this bounds it at every member, per
        /// sending origin. 8 MiB is an eighth of a second of a 64 MB/s stream; members that keep
        /// up acknowledge every sixteenth of it at once (`SessionCore.progressDigestBytes`), and
        /// collection runs every `pressedCollectInterval` under pressure. At 64 MiB the store alone
        /// was the largest part of a node's memory in the 16 KiB throughput benchmark (27 MiB at a
        /// receiver, 56 MiB at the sender, heaptrack); at 16 MiB a relay that is also a member,
        /// with the stream's other member behind its relay budget, held 15 MiB of message bodies
        /// at its peak (heaptrack, huddle-bench's reach row, 2026-11-28).
        public var storeLimitBytes = 8 << 20
        /// How long messages are kept for a member that failed, so that it can repair them when it
        /// comes back (a healed partition, a resumed process). 0 turns retention off.
        public var retainForFailed: Double = 600
        /// Stored bytes above which messages are no longer kept for failed members (well under
        /// `storeLimitBytes`: retention must never hold live members' sends back; half of it, as
        /// when the limit was 16 MiB and this 8).
        public var retainBytes = 4 << 20
        /// How long a message may wait for an origin it depends on that this member has never
        /// heard of: membership news and the origin's link arrive within seconds; past this the
        /// origin is taken to be gone (it failed before this member learned of it).
        public var unknownOriginWait: Double = 10
        /// Most unknown origins waited for at once (a hostile member could name any number).
        public var unknownOriginLimit = 1024
        /// How often acknowledgements in digests drop stable messages. Every digest would cost
        /// origins × members per digest, and a member gets one from every link ten times a second
        /// (at N = 100, 10^7 lookups per second per member); a membership change still drops at once.
        public var collectInterval: Double = 0.25
        /// How often acknowledgements drop stable messages while the store holds a quarter of
        /// `storeLimitBytes` or more. At `collectInterval` a stream's messages would stay a
        /// quarter second after everyone acknowledged them: at 60 MB/s, 15 MB at every member,
        /// near the limit at which sends wait. Under that pressure the cost of a collection
        /// (origins with stored messages × members) is paid at most 20 times a second.
        public var pressedCollectInterval: Double = 0.05
        /// How long a member behind an origin waits, while no peer offers the next seq it needs
        /// (every peer ahead stores only later ones), before it gives those seqs up as a `gap`.
        /// Every peer sends a digest at least every `SessionCore.digestRefresh` (1 s), so a peer
        /// that still stores the next seq says so several times within this; a restarted member
        /// or a laggard whose messages were dropped everywhere used to stall on that origin for ever.
        public var gapDelay: Double = 5
        public init() {}
    }

    public enum Effect: Sendable, Equatable {
        case deliver(SignedMessage)
        /// `origin`'s broadcasts `from...to` will never be delivered here: no member stores them
        /// any more. `nonApplicationThrough` is the origin's count of non-message broadcasts up to
        /// `to`, signed by the origin (the broadcast after the gap carries it, or the origin's own
        /// digest when nothing after the gap exists yet). Comes just before what follows the gap.
        /// nil when the origin is gone and nothing it signed tells the count: the lost broadcasts
        /// are then taken to have all been messages.
        case gap(origin: MemberID, from: UInt64, to: UInt64, nonApplicationThrough: UInt64?)
        /// Ask `peer` for `origin`'s messages `from...to`.
        case request(peer: MemberID, origin: MemberID, from: UInt64, to: UInt64)
    }

    /// What a member tells its peers: what it delivered and from which seq it still stores.
    public struct Digest: Sendable, Equatable {
        public var delivered: [MemberID: UInt64]
        public var storedFrom: [MemberID: UInt64]
        /// The sender's own non-message broadcasts up to its own seq (`delivered[sender]`): what a
        /// member behind it needs to number its later messages after a gap that reaches its last
        /// broadcast. Only ever believed about the sender itself.
        public var ownNonApplication: UInt64
        public init(delivered: [MemberID: UInt64], storedFrom: [MemberID: UInt64], ownNonApplication: UInt64 = 0) {
            self.delivered = delivered; self.storedFrom = storedFrom; self.ownNonApplication = ownNonApplication
        }
    }

    public let local: MemberID
    public let settings: Settings
    public private(set) var ownSeq: UInt64 = 0
    private var counter: UInt64 = 0
    /// This member's own broadcasts so far that were not messages (journal entries).
    public private(set) var ownNonApplication: UInt64 = 0
    /// The highest seq of this member's own broadcasts handed to `stored(own:)` (signed and on
    /// their way): digests never show the ones still in the pending batch as stored nowhere.
    private var ownStoredThrough: UInt64 = 0
    /// Highest broadcast seq delivered per origin (the `clock` of the control protocol).
    public private(set) var delivered: [MemberID: UInt64]
    /// Per origin, the seq deliveries started after (from the sponsor, or the origin's link hello).
    public private(set) var baseline: [MemberID: UInt64] = [:]
    /// True until a joining member has its sponsor's baseline; nothing from others is delivered before.
    public private(set) var awaitingBaseline: Bool
    private var depsAtLastBroadcast: [MemberID: UInt64] = [:]
    private var held: [MemberID: [UInt64: SignedMessage]] = [:]
    private var heldDirected: [SignedMessage] = []
    /// Per origin, the counters of the directed messages taken: a replayed directed message (it
    /// has no seq to tell it by) is a duplicate. At most `directedOriginLimit` origins, members first.
    private var directedSeen: [MemberID: ReplayWindow] = [:]
    static let directedOriginLimit = 4096
    public private(set) var heldCount = 0
    /// Bytes held back per origin (broadcasts and directed messages), as `storedSize` counts them.
    public private(set) var heldBytes: [MemberID: Int] = [:]
    /// Messages held back per origin (broadcasts and directed messages).
    public private(set) var heldCounts: [MemberID: Int] = [:]
    /// Per origin with messages held back, since when no message of it was delivered (set at the
    /// next digest: `receive` has no clock); past `heldExpiry` its held messages are dropped.
    private var heldWaiting: [MemberID: Double] = [:]
    /// Per origin with messages held back, since when it has had some held without a pause (set
    /// at the next digest, as `heldWaiting`; forgotten when its hold-back empties).
    private var heldContinuously: [MemberID: Double] = [:]
    /// `delivered` as it was at recent moments (every `ackDeadline` / 2), to tell laggards by.
    private var deliveredMarks: [(at: Double, clock: [MemberID: UInt64])] = []
    /// When each live member became one: a member is judged a laggard only on marks after that.
    private var memberSince: [MemberID: Double] = [:]
    /// Live members that left messages delivered here unacknowledged for `ackDeadline` (see there).
    public private(set) var laggards: Set<MemberID> = []
    /// Messages refused by a budget, by reason (`.heldBytes`).
    public private(set) var refusals = RefusalCounts()
    private var store: [MemberID: MessageRun] = [:]
    /// Per origin with stored messages: the holder whose acknowledgement was below the first of
    /// them at the last collection (`dropStable`). While it still is, nothing of that origin can be
    /// dropped, and the origin costs one lookup instead of one per holder. At most one entry per
    /// origin in `store`.
    private var pinnedBy: [MemberID: MemberID] = [:]
    public private(set) var storedBytes = 0
    private var acks: [MemberID: [MemberID: UInt64]] = [:]
    private var members: Set<MemberID> = []
    /// Members that failed, and when: messages are kept for them for `retainForFailed`.
    private var retained: [MemberID: Double] = [:]
    /// Origins never heard of that held messages depend on, and since when (set at the next
    /// digest after the first such message: `receive` has no clock).
    private var unknownOrigins: [MemberID: Double?] = [:]
    /// How many origins were ever noted unknown: a change tells the caller that messages now wait
    /// on one more (`awaitedOrigins`).
    public private(set) var unknownOriginsNoted: UInt64 = 0
    /// The origins messages wait on that this member has never had a link hello or baseline from.
    public var awaitedOrigins: Dictionary<MemberID, Double?>.Keys { unknownOrigins.keys }
    /// Origins taken to be gone without ever being heard of: dependencies on them count as met.
    private var goneOrigins: Set<MemberID> = []
    /// When acknowledgements last dropped stable messages (`collectInterval`).
    private var collectedAt = -Double.infinity
    /// Per member: this member's own seq when it learned of it. Broadcasts after that are kept for
    /// it until it acknowledges them, so they are its to deliver (`helloSeq(for:)`).
    private var ownSeqWhenKnown: [MemberID: UInt64] = [:]
    /// Per origin, while a peer shows more than this member delivered: since when deliveries have
    /// not moved on by themselves, where they stood at the last digest, and the most a peer showed.
    private struct Lag { var since: Double; var mark: UInt64; var target: UInt64 }
    private var behind: [MemberID: Lag] = [:]
    /// Per origin, the last repair request: its highest seq, how far its answer should carry
    /// deliveries (held messages it releases), and when it was sent.
    private var requested: [MemberID: (upTo: UInt64, reach: UInt64, at: Double)] = [:]
    /// Per origin this member is behind while no peer offers its next seq: since when, at which
    /// clock, and the lowest seq a peer ahead still stores (where a gap would end).
    private struct Unserved {
        var since: Double
        var mark: UInt64
        var lowestStored: UInt64
        /// The members that sent a digest during the wait.
        var heard: Set<MemberID> = []
    }
    private var unserved: [MemberID: Unserved] = [:]
    /// Per origin, a gap given up on (`gapDelay`) and not yet closed: this member skips to `to`
    /// once it knows the origin's count there (the broadcast at `to + 1`, or the origin's digest).
    private var lostThrough: [MemberID: (to: UInt64, at: Double)] = [:]
    /// Per origin, at this member's clock `mark` on it, the peers asked for its next seq and since
    /// when: a peer asked for `gapDelay` that never sent it no longer holds a gap open by offering
    /// it (a member that offers and does not answer would otherwise stall a real gap for ever).
    private var askedForNext: [MemberID: (mark: UInt64, since: [MemberID: Double])] = [:]
    /// Most peers remembered per origin in `askedForNext` (members are far fewer).
    static let askedPeersLimit = 256
    /// Per origin, the last count of non-message broadcasts its own digest gave, and its seq then.
    private var originCounts: [MemberID: (seq: UInt64, count: UInt64)] = [:]
    /// Gaps closed (origins' broadcast seqs given up on, counted in seqs).
    public private(set) var gapSeqs: UInt64 = 0
    /// Per removed origin, the last broadcast seq of it that counts (`setCutoff`).
    public private(set) var cutoffs: [MemberID: UInt64] = [:]
    public private(set) var duplicates = 0
    public private(set) var refusedForRoom = 0
    /// This member's own directed messages not yet acknowledged by their recipients (see there).
    public private(set) var directedOut = DirectedOutbox()
    /// Per origin, the highest counter of its directed messages delivered here (what this member
    /// acknowledges to it: an origin's directed messages to one member travel one link at a time,
    /// in order, so what is delivered of them is everything up to that counter).
    public private(set) var directedDelivered: [MemberID: UInt64] = [:]
    /// Per origin, the counter this member last acknowledged to it (`directedAcks`).
    private var directedAckSent: [MemberID: UInt64] = [:]

    public init(local: MemberID, awaitingBaseline: Bool, settings: Settings = Settings()) {
        self.local = local
        self.settings = settings
        self.awaitingBaseline = awaitingBaseline
        delivered = [local: 0]
    }

    /// Whether stored messages have reached the bound at which new sends must wait.
    /// (Held-back messages never make this member's own sends wait: they have budgets of their own.)
    /// Own directed messages waiting for their recipients' acknowledgement count too, and have a
    /// smaller bound of their own (`DirectedOutbox.limitBytes`).
    public var isCongested: Bool { storedBytes + directedOut.bytes >= settings.storeLimitBytes || directedOut.isFull }
    public var storedCount: Int { store.values.reduce(0) { $0 + $1.count } }
    /// Stored messages that some live member has not acknowledged yet (the rest are kept only
    /// for failed members).
    public var unacknowledgedCount: Int {
        store.reduce(0) { total, entry in
            let (origin, run) = entry
            let stable = stable(origin, counting: members)
            // What is stored above `stable`: at most the run, whatever a peer's ack said.
            guard !run.isEmpty, stable < run.nextSeq - 1 else { return total }
            return total + min(run.count, Int(clamping: run.nextSeq - max(run.firstSeq, stable &+ 1)))
        }
    }
    /// What a stored message counts against `storeLimitBytes`.
    private static func storedSize(_ signed: SignedMessage) -> Int { signed.message.body.count + 128 }

    // MARK: sending

    /// The next broadcast of this member; its deps are what it delivered since its last broadcast
    /// (the earlier ones are implied by its own predecessor). It counts as delivered here.
    public mutating func makeBroadcast(body: [UInt8], kind: WireMessage.Kind = .application) -> WireMessage {
        ownSeq += 1
        counter += 1
        let nonApplicationBefore = ownNonApplication
        if kind != .application { ownNonApplication += 1 }
        var deps: [WireMessage.Dependency] = []
        for (origin, seq) in delivered where origin != local && seq > (depsAtLastBroadcast[origin] ?? 0) && seq > (baseline[origin] ?? 0) {
            deps.append(.init(member: origin, seq: seq))
            depsAtLastBroadcast[origin] = seq
        }
        deps.sort { $0.member < $1.member }
        delivered[local] = ownSeq
        return WireMessage(origin: local, counter: counter, seq: ownSeq, kind: kind, nonApplicationBefore: nonApplicationBefore, deps: deps, to: nil, body: body)
    }

    /// A directed send: no seq; deps are everything delivered here past the baselines (own broadcasts included).
    public mutating func makeDirected(body: [UInt8], to: [MemberID], kind: WireMessage.Kind = .application) -> WireMessage {
        counter += 1
        let deps = delivered.filter { $0.value > (baseline[$0.key] ?? 0) }.map { WireMessage.Dependency(member: $0.key, seq: $0.value) }.sorted { $0.member < $1.member }
        return WireMessage(origin: local, counter: counter, seq: 0, kind: kind, deps: deps, to: to, body: body)
    }

    /// An unreliable send: a message id and nothing else.
    public mutating func makeUnreliable(body: [UInt8], to: [MemberID]?) -> WireMessage {
        counter += 1
        return WireMessage(origin: local, counter: counter, seq: 0, to: to, body: body)
    }

    /// Keeps this member's own signed broadcast for repair until every member has it, and its own
    /// directed message until each recipient acknowledges it (`directedOut`).
    public mutating func stored(own signed: SignedMessage) {
        guard signed.message.seq > 0 else {
            if let to = signed.message.to {
                directedOut.keep(signed, for: to.filter { $0 != local }, size: Self.storedSize(signed))
            }
            return
        }
        ownStoredThrough = max(ownStoredThrough, signed.message.seq)
        keep(signed)
    }

    /// The message-id counter (what a `ResumePoint` keeps).
    public var counterValue: UInt64 { counter }

    /// This member's stored broadcasts from seq `from` on (what the shell writes ahead of a batch
    /// leaving, for a restart to repair others with).
    public func ownStored(from seq: UInt64) -> [SignedMessage] {
        guard let run = store[local], !run.isEmpty, max(seq, run.firstSeq) < run.nextSeq else { return [] }
        return (max(seq, run.firstSeq)..<run.nextSeq).compactMap { run[$0] }
    }

    /// The lowest seq of this member's broadcasts still stored (`ownSeq + 1` when none is).
    public var ownStoredFrom: UInt64 { store[local].flatMap { $0.isEmpty ? nil : $0.firstSeq } ?? ownSeq &+ 1 }

    /// Takes up a restarted member's broadcast state (`ResumePoint`): it delivers each origin's
    /// broadcasts after `delivered`, continues its own after `ownSeq`, and keeps `ownMessages`
    /// (its own broadcasts, seqs ascending and consecutive) for repair until every member has them.
    mutating func resume(ownSeq: UInt64, ownNonApplication: UInt64, counter: UInt64, delivered: [MemberID: UInt64], baseline: [MemberID: UInt64],
                         ownMessages: [SignedMessage]) {
        self.ownSeq = ownSeq
        self.ownNonApplication = min(ownNonApplication, ownSeq)
        ownStoredThrough = ownSeq
        self.counter = max(counter, ownSeq)
        self.delivered = delivered
        self.delivered[local] = ownSeq
        self.baseline = baseline
        awaitingBaseline = false
        depsAtLastBroadcast = [:]
        for signed in ownMessages where signed.message.origin == local && signed.message.seq > 0 && signed.message.seq <= ownSeq {
            storedBytes += Self.storedSize(signed)
            storedBytes -= store[local, default: MessageRun()].append(signed, bytes: Self.storedSize)
        }
    }

    // MARK: baselines and membership

    /// What this member says in its hello on a new link to `peer`: the seq after which `peer` is to
    /// deliver its broadcasts — its own seq when it learned of `peer`, not its seq now. Broadcasts
    /// made after it knew `peer` but before the link was up reached only the others, are stored
    /// here until `peer` acknowledges them, and `peer` repairs them; with the current seq it would
    /// never deliver them. A peer it does not know yet starts at the current seq.
    public func helloSeq(for peer: MemberID) -> UInt64 { ownSeqWhenKnown[peer] ?? ownSeq }

    /// `origin` said on its new link that `peer`'s deliveries from it start after `seq` (its
    /// `helloSeq(for:)`), which holds if nothing earlier set a baseline.
    public mutating func linkHello(origin: MemberID, seq: UInt64) -> [Effect] {
        guard origin != local, delivered[origin] == nil else { return [] }
        delivered[origin] = seq
        baseline[origin] = seq
        unknownOrigins[origin] = nil
        goneOrigins.remove(origin)
        return release()
    }

    /// The sponsor's clock when this member joined.
    public mutating func adoptBaseline(_ clock: [MemberID: UInt64]) -> [Effect] {
        for (origin, seq) in clock where origin != local {
            let start = max(delivered[origin] ?? 0, seq)
            delivered[origin] = start
            baseline[origin] = start
            unknownOrigins[origin] = nil
            goneOrigins.remove(origin)
            if var queue = held[origin] {
                for s in queue.keys where s <= start {
                    if let dropped = queue.removeValue(forKey: s) { unhold(dropped) }
                }
                held[origin] = queue.isEmpty ? nil : queue
            }
        }
        awaitingBaseline = false
        return release()
    }

    /// The members that count for stability (alive or suspect), self excluded or not, at `now`.
    /// A member that drops out of the set is taken to have failed: messages are kept for it for
    /// `retainForFailed` (`memberLeft` ends that for a member that left for good).
    public mutating func setMembers(_ live: Set<MemberID>, now: Double) -> [Effect] {
        let live = live.subtracting([local])
        // Membership news that leaves the set as it was (a suspicion, an update) changes nothing here.
        guard live != members else { return [] }
        for member in members.subtracting(live) {
            if settings.retainForFailed > 0 { retained[member] = now }
            // Nothing more can come from a member that departs before this member heard of its messages.
            if delivered[member] == nil { noteGone(member) }
        }
        for member in live {
            retained[member] = nil
            if memberSince[member] == nil { memberSince[member] = now }
        }
        members = live
        directedOut.keepOnly(live)
        directedDelivered = directedDelivered.filter { live.contains($0.key) }
        directedAckSent = directedAckSent.filter { live.contains($0.key) }
        memberSince = memberSince.filter { live.contains($0.key) }
        laggards.formIntersection(live)
        for member in members where ownSeqWhenKnown[member] == nil { ownSeqWhenKnown[member] = ownSeq }
        // A member that left the set and comes back was not kept for in between: it starts afresh.
        ownSeqWhenKnown = ownSeqWhenKnown.filter { members.contains($0.key) }
        acks = acks.filter { members.contains($0.key) || retained[$0.key] != nil }
        collectGarbage(now: now)
        return release()
    }

    /// `member` left the session for good (a signed `left`): nothing is kept for it any more.
    public mutating func memberLeft(_ member: MemberID, now: Double) {
        guard retained.removeValue(forKey: member) != nil else { return }
        acks[member] = nil
        collectGarbage(now: now)
    }

    /// The members messages are still kept for although they are not live.
    public var retainedMembers: Set<MemberID> { Set(retained.keys) }

    private mutating func noteGone(_ origin: MemberID) {
        unknownOrigins[origin] = nil
        if goneOrigins.count >= settings.unknownOriginLimit { goneOrigins.removeAll(keepingCapacity: true) }
        goneOrigins.insert(origin)
    }

    // MARK: receiving

    /// A verified message from its origin or a relay.
    public mutating func receive(_ signed: SignedMessage) -> [Effect] {
        let m = signed.message
        guard m.origin != local else { return [] }
        if let cutoff = cutoffs[m.origin], m.seq == 0 || m.seq > cutoff {
            refusals.add(.afterRemoval)
            return []
        }
        if m.seq == 0 {
            guard m.to?.contains(local) ?? false else { return [] }
            guard heldDirected.count < settings.holdbackLimit else {
                refusedForRoom += 1
                return []
            }
            if directedSeen[m.origin] == nil, directedSeen.count >= Self.directedOriginLimit {
                directedSeen = directedSeen.filter { members.contains($0.key) }
            }
            // A replay is a duplicate; the counter counts as seen only once the message is held.
            var seen = directedSeen[m.origin, default: ReplayWindow()]
            guard seen.accept(m.counter) else {
                duplicates += 1
                return []
            }
            guard makeRoom(signed, evictingAbove: 0) else { return [] }
            directedSeen[m.origin] = seen
            heldDirected.append(signed)
            hold(signed)
            noteUnknownDependencies(m)
            return release()
        }
        if let d = delivered[m.origin], m.seq <= d {
            duplicates += 1
            return []
        }
        if held[m.origin]?.index(forKey: m.seq) != nil {
            duplicates += 1
            return []
        }
        // A full hold-back still takes the message that is next in line: it leaves at once.
        let deliverableNow = !awaitingBaseline && delivered[m.origin].map { $0 < .max && m.seq == $0 + 1 } == true && depsSatisfied(m)
        if deliverableNow && held[m.origin] == nil {
            // The common case (in order, nothing held from this origin): delivered without passing
            // through the hold-back; what waited on it is released after it.
            var out = [accept(signed)]
            if heldCount > 0 { out += release() }
            return out
        }
        guard heldCount < settings.holdbackLimit || deliverableNow else {
            refusedForRoom += 1
            return []
        }
        guard deliverableNow || makeRoom(signed, evictingAbove: m.seq) else { return [] }
        // A broadcast inside a gap given up on came after all: the gap is off.
        if let lost = lostThrough[m.origin], m.seq <= lost.to {
            lostThrough[m.origin] = nil
            unserved[m.origin] = nil
        }
        held[m.origin, default: [:]][m.seq] = signed
        hold(signed)
        noteUnknownDependencies(m)
        return release()
    }

    /// Counts a message into the hold-back (`held` or `heldDirected` already has it).
    private mutating func hold(_ signed: SignedMessage) {
        heldCount += 1
        heldBytes[signed.message.origin, default: 0] += Self.storedSize(signed)
        heldCounts[signed.message.origin, default: 0] += 1
    }

    /// Counts a message out of the hold-back (`held` or `heldDirected` no longer has it).
    private mutating func unhold(_ signed: SignedMessage) {
        heldCount -= 1
        let origin = signed.message.origin
        let left = (heldBytes[origin] ?? 0) - Self.storedSize(signed)
        heldBytes[origin] = left > 0 ? left : nil
        let count = (heldCounts[origin] ?? 0) - 1
        heldCounts[origin] = count > 0 ? count : nil
    }

    /// Drops the held messages of origins that delivered nothing for `heldExpiry`, or had messages
    /// held for twice that without a pause (see there).
    private mutating func expireHeld(now: Double) {
        for origin in Array(heldWaiting.keys) where heldCounts[origin] == nil { heldWaiting[origin] = nil }
        for origin in Array(heldContinuously.keys) where heldCounts[origin] == nil { heldContinuously[origin] = nil }
        for origin in heldCounts.keys {
            let holding = heldContinuously[origin] ?? now, since = heldWaiting[origin] ?? now
            heldContinuously[origin] = holding
            heldWaiting[origin] = since
            guard now - since >= settings.heldExpiry || now - holding >= 2 * settings.heldExpiry else { continue }
            heldWaiting[origin] = nil
            heldContinuously[origin] = nil
            for signed in held.removeValue(forKey: origin)?.values ?? [:].values {
                unhold(signed)
                refusals.add(.heldExpired)
            }
            let (expired, kept) = heldDirected.reduce(into: ([SignedMessage](), [SignedMessage]())) {
                if $1.message.origin == origin { $0.0.append($1) } else { $0.1.append($1) }
            }
            heldDirected = kept
            for signed in expired {
                unhold(signed)
                refusals.add(.heldExpired)
            }
        }
    }

    /// Whether `signed` fits its origin's hold-back budget (bytes and count), after evicting that
    /// origin's held broadcasts with a seq above `seq` (all of them for `seq` 0, a directed
    /// message), highest first: they are repaired later, while what is lower is needed sooner.
    /// Refused (counted) when it still does not fit.
    private mutating func makeRoom(_ signed: SignedMessage, evictingAbove seq: UInt64) -> Bool {
        let origin = signed.message.origin, size = Self.storedSize(signed)
        let budget = settings.holdbackBytesPerOrigin, countBudget = settings.holdbackCountPerOrigin
        func over() -> Bool { (heldBytes[origin] ?? 0) + size > budget || (heldCounts[origin] ?? 0) + 1 > countBudget }
        // Sorted only when something above `seq` is held: a flood above everything held costs one scan.
        if over(), let queue = held[origin], queue.keys.contains(where: { $0 > seq }) {
            for victim in queue.keys.sorted(by: >) where victim > seq {
                guard over() else { break }
                if let evicted = held[origin]?.removeValue(forKey: victim) {
                    unhold(evicted)
                    refusals.add(.heldBytes)
                }
            }
            if held[origin]?.isEmpty ?? false { held[origin] = nil }
        }
        guard !over() else {
            refusals.add(.heldBytes)
            return false
        }
        return true
    }

    private func depsSatisfied(_ m: WireMessage) -> Bool {
        // A loop, not `allSatisfy` with a closure that captures `self` (a copy of every table per message).
        for dep in m.deps {
            if let d = delivered[dep.member] {
                // Above a removed origin's cut-off nothing more comes: the cut-off is all there is.
                if d < dep.seq, d < cutoffs[dep.member] ?? .max { return false }
            } else if !goneOrigins.contains(dep.member) {
                // An origin never heard of: its messages may still be on their way (membership news of
                // a new member can come after a reply to it). Only one known to be gone counts as met.
                return false
            }
        }
        return true
    }

    /// Notes the origins `m` depends on that this member has never heard of, to wait for them.
    private mutating func noteUnknownDependencies(_ m: WireMessage) {
        for dep in m.deps where delivered[dep.member] == nil && !goneOrigins.contains(dep.member) && unknownOrigins[dep.member] == nil {
            // A hostile member could name origins without end: past the limit they count as gone.
            if unknownOrigins.count >= settings.unknownOriginLimit {
                noteGone(dep.member)
            } else {
                unknownOrigins[dep.member] = .some(nil)
                unknownOriginsNoted &+= 1
            }
        }
    }

    /// Starts the wait of newly noted unknown origins at `now`, and gives up on those waited for
    /// `unknownOriginWait`: messages depending on them are released.
    private mutating func expireUnknownOrigins(now: Double) -> [Effect] {
        guard !unknownOrigins.isEmpty else { return [] }
        var expired = false
        for (origin, since) in unknownOrigins {
            if delivered[origin] != nil { unknownOrigins[origin] = nil; continue }
            guard let since else { unknownOrigins[origin] = .some(now); continue }
            if now - since >= settings.unknownOriginWait {
                noteGone(origin)
                expired = true
            }
        }
        return expired ? release() : []
    }

    /// Delivers `signed`, the next broadcast of its origin: advances the origin's clock and keeps
    /// the message for repair.
    private mutating func accept(_ signed: SignedMessage) -> Effect {
        delivered[signed.message.origin] = signed.message.seq
        // Delivered after all (or past it): a gap given up on is off, and its wait starts again.
        if !lostThrough.isEmpty { lostThrough[signed.message.origin] = nil }
        if !heldWaiting.isEmpty { heldWaiting[signed.message.origin] = nil }
        keep(signed)
        return .deliver(signed)
    }

    /// Delivers everything whose predecessors and dependencies are delivered, until nothing moves.
    private mutating func release() -> [Effect] {
        guard !awaitingBaseline else { return [] }
        var out: [Effect] = []
        var progress = true
        while progress {
            progress = false
            // In member order: concurrent messages are delivered in the same order in every process.
            for origin in held.keys.sorted() {
                if let lost = lostThrough[origin], let after = held[origin]?[lost.to &+ 1], held[origin]?.keys.min() == lost.to &+ 1,
                   depsSatisfied(after.message) {
                    out += closeGap(origin, through: lost.to, count: after.message.nonApplicationBefore)
                }
                guard var next = delivered[origin] else { continue }
                while let signed = held[origin]?[next + 1], depsSatisfied(signed.message) {
                    held[origin]?[next + 1] = nil
                    unhold(signed)
                    next += 1
                    out.append(accept(signed))
                    progress = true
                }
                if held[origin]?.isEmpty ?? false { held[origin] = nil }
            }
            var index = 0
            while index < heldDirected.count {
                if depsSatisfied(heldDirected[index].message) {
                    let signed = heldDirected.remove(at: index)
                    unhold(signed)
                    let origin = signed.message.origin
                    directedDelivered[origin] = max(directedDelivered[origin] ?? 0, signed.message.counter)
                    out.append(.deliver(signed))
                    progress = true
                } else {
                    index += 1
                }
            }
        }
        return out
    }

    // MARK: directed acknowledgements

    /// `peer` acknowledged this member's directed messages to it up to `counter` (at most this
    /// member's own counter: a peer cannot acknowledge what was never made).
    public mutating func directedAcknowledged(by peer: MemberID, through counter: UInt64) {
        directedOut.acknowledged(by: peer, through: min(counter, self.counter))
    }

    /// The acknowledgements due to the `linked` origins: each one's highest delivered directed
    /// counter, when it moved since last sent.
    public mutating func directedAcks(linked: [MemberID]) -> [(MemberID, UInt64)] {
        var out: [(MemberID, UInt64)] = []
        for peer in linked {
            guard let through = directedDelivered[peer], through != directedAckSent[peer] else { continue }
            directedAckSent[peer] = through
            out.append((peer, through))
        }
        return out
    }

    /// A link to `peer` came up: its last acknowledgement may have been lost with the old link
    /// (and it sends again what it has not seen acknowledged), so the next `directedAcks` says it again.
    public mutating func directedLinkUp(_ peer: MemberID) { directedAckSent[peer] = nil }

    private mutating func keep(_ signed: SignedMessage) {
        guard !members.isEmpty || !retained.isEmpty else { return }
        storedBytes += Self.storedSize(signed)
        storedBytes -= store[signed.message.origin, default: MessageRun()].append(signed, bytes: Self.storedSize)
    }

    // MARK: removed origins

    /// `origin` was removed: its broadcasts after `seq` never count here (raised only: the highest
    /// cut-off any removing change gives wins). Drops what is held of it above the cut-off, and
    /// its held directed messages; releases what waited on it.
    public mutating func setCutoff(_ origin: MemberID, through seq: UInt64) -> [Effect] {
        guard origin != local, seq > cutoffs[origin] ?? 0 || cutoffs[origin] == nil else { return [] }
        cutoffs[origin] = seq
        if var queue = held[origin] {
            for s in queue.keys where s > seq {
                if let dropped = queue.removeValue(forKey: s) { unhold(dropped) }
            }
            held[origin] = queue.isEmpty ? nil : queue
        }
        let directed = heldDirected.filter { $0.message.origin == origin }
        if !directed.isEmpty {
            heldDirected.removeAll { $0.message.origin == origin }
            for signed in directed { unhold(signed) }
        }
        if let lost = lostThrough[origin], lost.to > seq { lostThrough[origin] = nil; unserved[origin] = nil }
        behind[origin] = nil
        requested[origin] = nil
        return release()
    }

    // MARK: anti-entropy

    public func digest() -> Digest {
        var storedFrom: [MemberID: UInt64] = [:]
        storedFrom.reserveCapacity(delivered.count)
        for (origin, seq) in delivered {
            storedFrom[origin] = store[origin].flatMap { $0.isEmpty ? nil : $0.firstSeq } ?? seq + 1
        }
        // Own broadcasts made but not yet signed and stored (the pending batch) are about to be.
        if ownStoredThrough < ownSeq { storedFrom[local] = min(storedFrom[local] ?? .max, ownStoredThrough &+ 1) }
        return Digest(delivered: delivered, storedFrom: storedFrom, ownNonApplication: ownNonApplication)
    }

    /// A peer's digest: it acknowledges what it delivered, and shows what it could give us.
    ///
    /// Being behind a peer is normal while messages stream: they are in flight, or queued for this
    /// member to process. A member asks for a gap only once its deliveries from that origin have
    /// stalled for `repairDelay` while a peer shows more, and then asks only for the seqs it does
    /// not hold (held-back messages are not fetched again).
    public mutating func receiveDigest(_ digest: Digest, from peer: MemberID, now: Double) -> [Effect] {
        if !heldCounts.isEmpty || !heldWaiting.isEmpty || !heldContinuously.isEmpty { expireHeld(now: now) }
        if members.contains(peer) || retained[peer] != nil {
            acks[peer] = digest.delivered
            let pressed = storedBytes >= settings.storeLimitBytes / 4
            if now - collectedAt >= (pressed ? settings.pressedCollectInterval : settings.collectInterval) { collectGarbage(now: now) }
        }
        guard !awaitingBaseline else { return [] }
        var out = expireUnknownOrigins(now: now)
        // A member's own word about its own broadcasts (bounded as every count a member makes).
        if peer != local, let seq = digest.delivered[peer], seq <= WireReader.madeCountLimit, delivered[peer] != nil {
            originCounts[peer] = (seq, min(digest.ownNonApplication, seq))
        }
        if !unserved.isEmpty {
            for origin in Array(unserved.keys) { unserved[origin]?.heard.insert(peer) }
        }
        // A gap given up on that nothing closed within three times `gapDelay` is forgotten (the
        // wait starts again), whoever sends digests.
        if !lostThrough.isEmpty {
            for (origin, lost) in lostThrough where now - lost.at >= 3 * settings.gapDelay { lostThrough[origin] = nil }
        }
        var requests: [Effect] = []
        // Each origin's rule stands alone; requests are put in member order after (sorting every
        // digest's clock cost more than the rest of the loop).
        for (origin, shown) in digest.delivered where origin != local {
            // Nothing above a removed origin's cut-off is asked for. (Most sessions remove nobody:
            // no lookup then, one fewer per origin per digest.)
            let theirs = cutoffs.isEmpty ? shown : min(shown, cutoffs[origin] ?? .max)
            guard let known = delivered[origin], theirs > known, theirs <= WireReader.madeCountLimit else { continue }
            out += noteOffer(origin, storedFrom: digest.storedFrom[origin] ?? theirs &+ 1, by: peer, now: now)
            // Past a gap given up on, repair starts after it.
            guard let clock = delivered[origin], theirs > clock else { continue }
            let mine = lostThrough[origin].map { max(clock, $0.to) } ?? clock
            // Progress that a repair did not bring (past what was asked for) means messages flow:
            // the stall timer starts again. So does catching up with what peers showed before.
            let repairReach = requested[origin]?.reach ?? 0
            guard theirs > mine else { continue }
            guard let lag = behind[origin], lag.target > mine, mine <= max(lag.mark, repairReach) else {
                behind[origin] = Lag(since: now, mark: mine, target: theirs)
                continue
            }
            behind[origin] = Lag(since: lag.since, mark: mine, target: max(lag.target, theirs))
            guard now - lag.since >= settings.repairDelay, (digest.storedFrom[origin] ?? .max) <= mine + 1 else { continue }
            if let pending = requested[origin], pending.upTo > mine, now - pending.at < settings.requestTimeout { continue }
            let highestHeld = held[origin]?.keys.max()
            let gaps = missing(origin, after: mine, through: min(theirs, highestHeld ?? theirs))
            guard let last = gaps.last else { continue }
            requested[origin] = (upTo: last.upperBound, reach: max(last.upperBound, highestHeld ?? 0), at: now)
            if lostThrough[origin] == nil, gaps.first?.lowerBound == clock &+ 1 { noteAsked(peer, forNextOf: origin, at: clock, now: now) }
            for gap in gaps { requests.append(.request(peer: peer, origin: origin, from: gap.lowerBound, to: gap.upperBound)) }
        }
        if requests.count > 1 { requests.sort { Self.requestOrder($0) < Self.requestOrder($1) } }
        return out + requests
    }

    private static func requestOrder(_ effect: Effect) -> (MemberID, UInt64) {
        if case let .request(_, origin, from, _) = effect { (origin, from) } else { (MemberID(raw: 0), 0) }
    }

    // MARK: gaps

    /// A peer ahead on `origin` stores its broadcasts from `storedFrom` on. An offer of this
    /// member's next seq ends any wait for a gap (repair fills it). Otherwise, once no peer has
    /// offered it for `gapDelay` and every live member has sent a digest meanwhile (or six times
    /// that has passed: a member that never sends one cannot hold the wait for ever), the seqs
    /// below the lowest one a peer stores are given up on — only as far as the origin itself
    /// shows it made them (its own digest, or a broadcast of it held here): a member's claim
    /// about another member's messages never ends a gap by itself.
    private mutating func noteOffer(_ origin: MemberID, storedFrom offered: UInt64, by peer: MemberID, now: Double) -> [Effect] {
        guard let mine = delivered[origin] else { return [] }
        // An offer of the next seq by a peer asked for it for `gapDelay` that never sent it is not
        // believed: it neither ends the wait nor counts as where a gap would end.
        if offered <= mine &+ 1, let asked = askedForNext[origin], asked.mark == mine, let since = asked.since[peer],
           now - since >= settings.gapDelay {
            return []
        }
        func served() -> [Effect] {
            unserved[origin] = nil
            lostThrough[origin] = nil
            return []
        }
        guard offered > mine &+ 1 else { return served() }
        // What is held here is not lost either (it waits for its dependencies, not for repair).
        let lowestHeld = held[origin]?.keys.min()
        if let lowestHeld, lowestHeld <= mine &+ 1 { return served() }
        let storedFrom = min(offered, lowestHeld ?? .max)
        if let lost = lostThrough[origin] {
            let closed = closeFromOrigin(origin)
            guard closed.isEmpty else { return closed }
            // Not closed within `gapDelay` (nothing the origin signed told its count there): the
            // wait starts again. For an origin that is gone, nothing it signed will ever come:
            // the gap is closed without its count as far as messages held here depend on it
            // (their own origins signed that), so that they are not blocked for ever.
            guard now - lost.at >= settings.gapDelay else { return [] }
            lostThrough[origin] = nil
            unserved[origin] = nil
            if !members.contains(origin), let needed = highestHeldDependency(on: origin), needed > mine {
                return closeGap(origin, through: min(lost.to, needed), count: nil) + release()
            }
            return []
        }
        guard var wait = unserved[origin], wait.mark == mine else {
            unserved[origin] = Unserved(since: now, mark: mine, lowestStored: storedFrom)
            return []
        }
        wait.lowestStored = min(wait.lowestStored, storedFrom)
        unserved[origin] = wait
        let waited = now - wait.since
        guard waited >= settings.gapDelay, members.isSubset(of: wait.heard) || waited >= 6 * settings.gapDelay else { return [] }
        // The end the origin backs: its own digest's seq, or just below a broadcast of it held here.
        // For an origin that is gone, what messages held here depend on (signed by their origins)
        // backs it too: nothing of it will come again, and they would wait for ever.
        var backed = max(originCounts[origin]?.seq ?? 0, lowestHeld.map { $0 - 1 } ?? 0)
        if !members.contains(origin), let needed = highestHeldDependency(on: origin) { backed = max(backed, needed) }
        let to = min(wait.lowestStored - 1, backed, WireReader.madeCountLimit)
        unserved[origin] = nil
        guard to > mine else { return [] }
        lostThrough[origin] = (to, now)
        return closeFromOrigin(origin)
    }

    /// `peer` was asked for `origin`'s seq after `mark` (this member's clock on it); the first ask
    /// at each mark is when the peer's offer of it started to be tested.
    private mutating func noteAsked(_ peer: MemberID, forNextOf origin: MemberID, at mark: UInt64, now: Double) {
        if askedForNext[origin]?.mark != mark { askedForNext[origin] = (mark, [:]) }
        guard askedForNext[origin]?.since[peer] == nil, (askedForNext[origin]?.since.count ?? 0) < Self.askedPeersLimit else { return }
        askedForNext[origin]?.since[peer] = now
    }

    /// Closes `origin`'s pending gap when the origin's own digest gave its count exactly there
    /// (it stores nothing past the gap: the gap reaches its last broadcast).
    private mutating func closeFromOrigin(_ origin: MemberID) -> [Effect] {
        guard let lost = lostThrough[origin], let report = originCounts[origin], report.seq == lost.to,
              let mine = delivered[origin], lost.to > mine else { return [] }
        return closeGap(origin, through: lost.to, count: report.count) + release()
    }

    /// The highest seq of `origin` that a message held here depends on.
    private func highestHeldDependency(on origin: MemberID) -> UInt64? {
        var highest: UInt64?
        func note(_ m: WireMessage) {
            for dep in m.deps where dep.member == origin { highest = max(highest ?? 0, dep.seq) }
        }
        for queue in held.values { for signed in queue.values { note(signed.message) } }
        for signed in heldDirected { note(signed.message) }
        return highest
    }

    /// Gives up on `origin`'s broadcasts after `delivered` through `to`: deliveries continue after `to`.
    private mutating func closeGap(_ origin: MemberID, through to: UInt64, count: UInt64?) -> [Effect] {
        guard let mine = delivered[origin], to > mine, to <= WireReader.madeCountLimit else { return [] }
        delivered[origin] = to
        lostThrough[origin] = nil
        unserved[origin] = nil
        askedForNext[origin] = nil
        behind[origin] = nil
        requested[origin] = nil
        gapSeqs &+= to - mine
        if var queue = held[origin] {
            for seq in queue.keys where seq <= to {
                if let dropped = queue.removeValue(forKey: seq) { unhold(dropped) }
            }
            held[origin] = queue.isEmpty ? nil : queue
        }
        return [.gap(origin: origin, from: mine + 1, to: to, nonApplicationThrough: count)]
    }

    /// The runs of `origin`'s seqs in `mine+1...end` that are neither delivered nor held, at most
    /// `requestRange` seqs in all. Callers end at the highest held seq when something is held:
    /// messages above it may still be on their way.
    private func missing(_ origin: MemberID, after mine: UInt64, through end: UInt64) -> [ClosedRange<UInt64>] {
        let queue = held[origin] ?? [:]
        // `index(forKey:)`, not `queue[seq] == nil`: that copies the message (retains its arrays)
        // for every seq looked at, 7 % of the simulator's time at N = 100 with 60 NATted members.
        var gaps: [ClosedRange<UInt64>] = []
        var budget = settings.requestRange
        var seq = mine + 1
        while seq <= end && budget > 0 {
            guard queue.index(forKey: seq) == nil else { seq += 1; continue }
            let start = seq
            while seq < end && budget > 1 && queue.index(forKey: seq &+ 1) == nil { seq += 1; budget -= 1 }
            budget -= 1
            gaps.append(start...seq)
            seq += 1
        }
        return gaps
    }

    /// What this member stores of `origin` in `from...to`, to answer a repair request.
    public func stored(origin: MemberID, from: UInt64, to: UInt64) -> [SignedMessage] {
        guard from <= to, let messages = store[origin] else { return [] }
        return (from...min(to, from + settings.requestRange)).compactMap { messages[$0] }
    }

    /// The highest seq of `origin` delivered here and acknowledged by every one of `holders`.
    private func stable(_ origin: MemberID, counting holders: Set<MemberID>) -> UInt64 {
        var stable = delivered[origin] ?? 0
        for member in holders where member != origin { stable = min(stable, acks[member]?[origin] ?? 0) }
        return stable
    }

    /// Drops what every current member, and every member still retained for, has acknowledged.
    /// Retention ends for members failed longer than `retainForFailed` ago, and for all of them
    /// once the store passes `retainBytes`.
    private mutating func collectGarbage(now: Double) {
        collectedAt = now
        if !retained.isEmpty {
            let expired = retained.filter { now - $0.value >= settings.retainForFailed }.keys
            for member in expired { retained[member] = nil; acks[member] = nil }
        }
        findLaggards(now: now)
        dropStable(counting: members.union(retained.keys))
        if (!retained.isEmpty || !laggards.isEmpty) && storedBytes > settings.retainBytes {
            for member in retained.keys { acks[member] = nil }
            retained.removeAll()
            dropStable(counting: members.subtracting(laggards))
        }
    }

    /// Marks `delivered` every `ackDeadline` / 2 and names the laggards: live members (since
    /// before the mark) whose acknowledgements are still below the newest mark at least
    /// `ackDeadline` old, for an origin this member still stores.
    /// Judged only when a mark is taken (every `ackDeadline` / 2), not at every collection: at
    /// N members that is N × N lookups, which at every collection slowed the 100-member simulation.
    private mutating func findLaggards(now: Double) {
        let deadline = settings.ackDeadline
        guard deliveredMarks.last.map({ now - $0.at >= deadline / 2 }) ?? true else { return }
        deliveredMarks.append((now, delivered))
        while deliveredMarks.count > 1 && now - deliveredMarks[1].at >= deadline { deliveredMarks.removeFirst() }
        guard !store.isEmpty, let mark = deliveredMarks.first, now - mark.at >= deadline else { laggards = []; return }
        laggards = members.filter { member in
            guard let since = memberSince[member], since <= mark.at else { return false }
            let acked = acks[member]
            for (origin, seq) in mark.clock where origin != member && store[origin] != nil {
                if (acked?[origin] ?? 0) < seq { return true }
            }
            return false
        }
    }

    private mutating func dropStable(counting holders: Set<MemberID>) {
        guard !store.isEmpty else { return }
        // Each holder's acknowledgements are looked up once; then, per origin, the holder that held
        // it back last time is asked first. A member that failed (kept in `retained`) or lags holds
        // every origin back, and at 100 members the full origins × holders scan, 4 times a second
        // and finding nothing to drop, was 6 % of the session simulation.
        let ordered = Array(holders)
        let acked = ordered.map { acks[$0] }
        for origin in Array(store.keys) {
            // Only the first seq is read out (a copy of the run held across `drop` would copy its messages).
            guard let first = store[origin].flatMap({ $0.isEmpty ? nil : $0.firstSeq }) else {
                store[origin] = nil
                pinnedBy[origin] = nil
                continue
            }
            if let pin = pinnedBy[origin], pin != origin, holders.contains(pin), (acks[pin]?[origin] ?? 0) < first { continue }
            // The highest seq every holder acknowledged (and this member delivered). Nothing below
            // `first` is stored, so the scan ends at the first holder below it: it is the pin.
            var stable = delivered[origin] ?? 0
            var pin: MemberID?
            if stable >= first {
                for k in ordered.indices where ordered[k] != origin {
                    stable = min(stable, acked[k]?[origin] ?? 0)
                    if stable < first { pin = ordered[k]; break }
                }
            }
            pinnedBy[origin] = pin
            guard stable >= first else { continue }
            storedBytes -= store[origin, default: MessageRun()].drop(through: stable, bytes: Self.storedSize)
            if store[origin]?.isEmpty ?? false {
                store[origin] = nil
                pinnedBy[origin] = nil
            }
        }
    }
}
