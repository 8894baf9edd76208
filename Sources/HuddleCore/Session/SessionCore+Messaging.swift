import HuddleCrypto

/// Sending, signing and receiving messages, repair answers and the activity value: the rules the
/// node's shell held before (issue 19). Limits, membership of the recipients and backpressure are
/// decided here; the shell only turns refusals into control errors.
extension SessionCore {
    /// Largest message bodies a send may carry, and the budgets every peer is held to.
    public struct Limits: Sendable {
        /// Largest reliable body: a send above it is refused (`too_large`), and so is a received
        /// message above it (`Refusal.bodyTooLarge`, before it is verified or held). Every member
        /// of a session must use the same value, as it uses the same key.
        public var reliable = 64 * 1024
        /// Largest unreliable body, so that it fits one datagram.
        public var unreliable = 1024
        /// Largest `unreliable` a member may set (`--max-unreliable-bytes`), and so the largest
        /// unreliable body any member accepts, as a datagram or over a link.
        public static let unreliableCeiling = 60_000
        /// Most members in the membership table (`SWIMSettings.memberLimit`).
        public var members = SWIMSettings.defaultMemberLimit
        /// Most bytes held back per origin (`CausalBroadcast.Settings.holdbackBytesPerOrigin`).
        public var holdbackBytesPerOrigin = CausalBroadcast.Settings.defaultHoldbackBytesPerOrigin
        /// Most bytes of chunks the store holds (`Journal.storeLimitBytes`).
        public var storeBytes = Journal.defaultStoreLimitBytes
        /// How long a member may leave messages unacknowledged before it stops pinning the store
        /// (`CausalBroadcast.Settings.ackDeadline`).
        public var ackDeadline = CausalBroadcast.Settings.defaultAckDeadline
        public init() {}
    }

    /// Most body bytes one signed batch carries: a batch crosses a link as one link message, which
    /// must stay within the link's message limit (one message alone may be larger, up to the body limit).
    public static let batchBytes = 256 * 1024

    /// Most bytes a client's envelope (CONTROL.md `send` field `envelope`, issue 38) may put in
    /// front of a reliable body beyond `Limits.reliable`, so that a HuddleKit program's 64 KiB of
    /// payload is not eaten by the type and sender it adds. Every member receives up to
    /// `Limits.reliable + envelopeAllowance` body bytes.
    public static let envelopeAllowance = 1024

    /// Sends a message: an unreliable one as a datagram to each live recipient this member holds
    /// link keys with (over the link to one whose datagrams may not arrive; best effort: one
    /// without a link yet misses it), a reliable one
    /// into the batch the next `flushBatch` signs. Delivered here too when this member is a
    /// recipient (`.deliverOwn`, `.deliverUnreliable`). The first `envelope` bytes of a reliable
    /// body (at most `envelopeAllowance`) do not count against `Limits.reliable`; an unreliable
    /// body counts whole, as it must fit one datagram.
    public mutating func send(body: [UInt8], envelope: Int = 0, to: [MemberID]?, reliable: Bool) throws(CoreError) -> (WireMessage, [SessionEffect]) {
        // A removed member has no session to send to (issue 21).
        guard !epochs.isRemoved else { throw .notMember(local) }
        let limit = reliable ? limits.reliable : limits.unreliable
        let counted = reliable ? body.count - min(max(envelope, 0), Self.envelopeAllowance, body.count) : body.count
        guard counted <= limit else { throw .tooLarge(size: counted, limit: limit, reliable: reliable) }
        for target in to ?? [] where target != local {
            guard isLive(target) else { throw swim.members[target] == nil ? .unknownMember(target) : .notMember(target) }
        }
        let here = to?.contains(local) ?? true
        guard reliable else {
            let message = broadcast.makeUnreliable(body: body, to: to)
            var out: [SessionEffect] = []
            for target in (to ?? swim.members.keys.sorted()) where target != local {
                if let info = swim.members[target], info.state == .alive || info.state == .suspect,
                   let datagram = unreliable(message, to: target, addr: info.addr) {
                    out.append(datagram)
                }
            }
            if here { out.append(.deliverUnreliable(message)) }
            return (message, out)
        }
        guard !broadcast.isCongested else { throw .busy(storedBytes: broadcast.storedBytes) }
        let message = to.map { broadcast.makeDirected(body: body, to: $0) } ?? broadcast.makeBroadcast(body: body)
        var out = queueForSigning(message)
        if here { out.append(.deliverOwn(message)) }
        return (message, out)
    }

    /// Adds a message of this member's to the batch the next flush signs. The first message of a
    /// batch asks the shell to flush soon (`.flushSoon`); a full batch is flushed at once.
    mutating func queueForSigning(_ message: WireMessage) -> [SessionEffect] {
        var out: [SessionEffect] = []
        if !pendingBatch.isEmpty && pendingBatchBytes + message.body.count > Self.batchBytes { out += flushBatch() }
        pendingBatch.append(message)
        pendingBatchBytes += message.body.count
        if pendingBatch.count == 1 {
            out.append(.flushSoon)
        } else if pendingBatch.count >= BatchProof.maximumBatch {
            out += flushBatch()
        }
        return out
    }

    /// Signs the pending messages with one signature, stores them for repair, and sends each link
    /// the part of the batch that is for its peer (all of it, unless the batch holds directed messages).
    public mutating func flushBatch() -> [SessionEffect] {
        guard !pendingBatch.isEmpty else { return [] }
        let flush = MessageBatch.sign(pendingBatch, identity: identity)
        pendingBatch = []
        pendingBatchBytes = 0
        for signed in flush { broadcast.stored(own: signed) }
        guard !planner.linked.isEmpty else { return [] }
        if flush.allSatisfy({ $0.message.to == nil }) {
            guard let whole = SignedBatch(of: flush, for: local) else { return [] }
            return [.sendToLinks(.batch(whole))]
        }
        return planner.linked.sorted().compactMap { peer in SignedBatch(of: flush, for: peer).map { .sendLink(peer, .batch($0)) } }
    }

    /// Whether messages wait to be signed (a link that comes up must not overtake them).
    public var hasPendingBatch: Bool { !pendingBatch.isEmpty }

    /// Signatures the shell checked off the core (`MessageBatch.check`), remembered as verified
    /// when the key each was checked against is the node key this core holds for its origin: the
    /// batches they sign are then not checked again here.
    public mutating func signaturesChecked(_ checked: [CheckedSignature]) {
        for c in checked where swim.members[c.origin]?.node == c.originNodeKey { verifiedRoots.insert(c.verified) }
    }

    /// A batch from its origin: its signature checked once against the origin's node key, then each message to broadcast.
    mutating func receiveBatch(_ batch: SignedBatch, from peer: MemberID, now: Double) -> [SessionEffect] {
        // Not `batch.messages.count { !fitsReceiveLimit($0.message) }`: a closure that captures
        // `self` copies the whole core (every table retained and released) per batch.
        var oversized = 0
        for signed in batch.messages where !fitsReceiveLimit(signed.message) { oversized += 1 }
        guard oversized == 0 else { return refuse(.bodyTooLarge, oversized) }
        // From a member not heard of: dropped (its key is unknown), and its record asked for.
        guard let key = swim.members[batch.origin]?.node else { return catchUpMembership(from: peer, now: now) }
        guard MessageBatch.verify(batch, originNodeKey: key, cache: &verifiedRoots) else {
            return [.forged(origin: batch.origin, count: batch.messages.count)]
        }
        let noted = broadcast.unknownOriginsNoted
        var out: [SessionEffect] = []
        for signed in batch.messages { out += broadcastEffects(broadcast.receive(signed), now: now) }
        return noted == broadcast.unknownOriginsNoted ? out : out + catchUpAwaitedOrigins(from: peer, now: now)
    }

    /// A message from its origin or a relay: verified against the origin's node key, then to broadcast.
    mutating func receiveSigned(_ signed: SignedMessage, from peer: MemberID, now: Double) -> [SessionEffect] {
        guard fitsReceiveLimit(signed.message) else { return refuse(.bodyTooLarge) }
        guard let key = swim.members[signed.message.origin]?.node else { return catchUpMembership(from: peer, now: now) }
        guard MessageBatch.verify(signed, originNodeKey: key, cache: &verifiedRoots) else {
            return [.forged(origin: signed.message.origin, count: 1)]
        }
        let noted = broadcast.unknownOriginsNoted
        let out = broadcastEffects(broadcast.receive(signed), now: now)
        return noted == broadcast.unknownOriginsNoted ? out : out + catchUpAwaitedOrigins(from: peer, now: now)
    }

    /// Messages now wait on origins this member has no link hello from: those that membership has
    /// not heard of either are asked of `peer`, which passed on a message depending on them.
    private mutating func catchUpAwaitedOrigins(from peer: MemberID, now: Double) -> [SessionEffect] {
        awaitsUnknownMember ? catchUpMembership(from: peer, now: now) : []
    }

    /// Messages wait on an origin that membership has not heard of either (no record, no key).
    private var awaitsUnknownMember: Bool {
        for origin in broadcast.awaitedOrigins where swim.members[origin] == nil { return true }
        return false
    }

    /// Messages still wait on a member not heard of (the peer asked did not know it either, or the
    /// ask was within the gap of another): every `membershipAskGap` × 2 the next linked member in
    /// turn is asked, until the origin is known or `unknownOriginWait` gives it up.
    mutating func membershipCatchUpTick(now: Double) -> [SessionEffect] {
        guard !broadcast.awaitedOrigins.isEmpty, now - membershipAskedAt >= 2 * Self.membershipAskGap, awaitsUnknownMember else { return [] }
        let peers = linkedLive
        guard !peers.isEmpty else { return [] }
        membershipAskRound &+= 1
        return catchUpMembership(from: peers[Int(membershipAskRound % UInt64(peers.count))], now: now)
    }

    /// Asks `peer` for the membership this member lacks (a push-pull: `peer` merges this member's
    /// state and answers with its own), at most once per `membershipAskGap`.
    mutating func catchUpMembership(from peer: MemberID, now: Double) -> [SessionEffect] {
        guard peer != local, now - membershipAskedAt >= Self.membershipAskGap else { return [] }
        membershipAskedAt = now
        return pushPullRequest(to: peer, join: false).map { .sendLink(peer, $0) }
    }

    /// A peer's repair request: the stored messages of `origin` in `from...to`, each sent alone
    /// with its proof, at most `repairAnswerBytes` of bodies (at least one message; the peer asks
    /// again for the rest).
    func answerRepair(origin: MemberID, from: UInt64, to: UInt64, peer: MemberID) -> [SessionEffect] {
        var bytes = 0
        let messages = broadcast.stored(origin: origin, from: from, to: to).prefix { signed in
            defer { bytes += signed.message.body.count }
            return bytes == 0 || bytes + signed.message.body.count <= Self.repairAnswerBytes
        }
        guard !messages.isEmpty else { return [] }
        return messages.map { .sendLink(peer, .message($0)) } + [.retransmitted(messages.count)]
    }

    // MARK: activity

    /// Sets the activity value (JSON bytes): signed with the next Lamport time, applied here and sent on every link.
    public mutating func setActivity(_ value: [UInt8], now: Double) -> [SessionEffect] {
        let record = ActivityRecord.make(lamport: activity.nextLamport(wallClock: now + wallClockOffset), setBy: local, value: value, identity: identity)
        return receiveActivity(record, now: now) + [.sendToLinks(.activity(record))]
    }

    /// The shell's wall clock at `now` (seconds since 1970): what activity times are measured by.
    public mutating func setWallClock(_ wallClock: Double, now: Double) {
        wallClockOffset = wallClock - now
        epochs.wallClockOffset = wallClockOffset
    }

    /// An activity record: believed only when its setter's node key signed it; applied when it is
    /// newer and not ahead of this member's wall clock by more than `ActivityRegister.maximumSkew`.
    mutating func receiveActivity(_ record: ActivityRecord, now: Double) -> [SessionEffect] {
        if record.setBy != local {
            guard let setter = swim.members[record.setBy] else { return [] }
            guard record.verify(nodeKey: setter.node) else { return [.forged(origin: record.setBy, count: 1)] }
            guard ActivityRegister.admits(record, wallClock: now + wallClockOffset) else { return refuse(.activityAhead) }
        }
        return activity.apply(record) ? [.activityChanged] : []
    }

    // MARK: the journal's broadcasts

    /// Whether an attachment of `size` plaintext bytes that this member adds fits its store limit
    /// beside what the store holds or is to hold (`Journal.storeFits`: the one store budget, shared
    /// with fetching), counted as the journal counts it: each chunk sealed, at `Manifest.defaultChunkSize`.
    public func storeFits(attachmentOf size: Int) -> Bool {
        guard size >= 0 else { return false }
        let chunk = Manifest.defaultChunkSize
        let chunks = size / chunk + (size % chunk == 0 ? 0 : 1)
        let (sealed, overflow) = chunks.multipliedReportingOverflow(by: chunk + AEAD.tagLength)
        return !overflow && journal.storeFits(sealed)
    }

    /// Adds an attachment this member stored (its manifest signed by this member): broadcast as a journal entry and applied here.
    public mutating func addAttachment(_ manifest: Manifest, key: [UInt8], now: Double) -> [SessionEffect] {
        journalBroadcast(.add(manifest, key: key), now: now)
    }

    /// Removes an attachment from the session's journal: only its uploader or an admin may
    /// (`mayRemoveAttachment`); refused when there is no such live attachment, or when this member may not.
    public mutating func removeAttachment(_ id: String, now: Double) throws(CoreError) -> [SessionEffect] {
        guard let record = journal.records[id], !record.removed else { throw .noSuchAttachment(id) }
        guard mayRemoveAttachment(record.manifest, by: local) else { throw .notUploaderOrAdmin(id) }
        return journalBroadcast(.remove(id: id), now: now)
    }

    private mutating func journalBroadcast(_ entry: JournalEntry, now: Double) -> [SessionEffect] {
        let message = broadcast.makeBroadcast(body: entry.encoded(), kind: .journal)
        applicationSeqs.noteNonApplication(local, message.seq)
        return queueForSigning(message) + journal.apply(entry, now: now).map(SessionEffect.journal)
    }
}
