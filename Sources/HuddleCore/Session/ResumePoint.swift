/// What a member keeps in its data directory to come back as itself after a restart (CONTROL.md,
/// Restart): who it is, the highest incarnation it signed, where its broadcasts and deliveries
/// stood, and where it last found the session. Taken by `SessionCore.resumePoint`, handed back to
/// `SessionCore.resume(from:ownMessages:)` by the next run.
///
/// Guarantees: a member resumed from a point continues its broadcast seqs after `ownSeq` (never
/// reusing one it may have sent, provided the point was written before its batch left: the shell's
/// write-ahead), delivers each origin's broadcasts after `delivered` exactly once, and numbers them
/// as it did before (`nonApplication`). `decode` never traps and refuses bytes it did not write.
public struct ResumePoint: Sendable, Equatable {
    public var member: MemberID
    /// The incarnation of this member's record when the point was taken.
    public var incarnation: UInt64
    public var ownSeq: UInt64
    /// The message-id counter (broadcast, directed and unreliable sends).
    public var counter: UInt64
    /// The counter of this member's session-key datagrams (peers refuse one they saw again).
    public var datagramCounter: UInt64 = 0
    /// Per origin, the highest broadcast seq delivered here (this member's own included).
    public var delivered: [MemberID: UInt64]
    public var baseline: [MemberID: UInt64]
    /// Per origin, its non-application broadcasts (journal entries) up to `delivered`.
    public var nonApplication: [MemberID: UInt64]
    /// The advertised addresses of the members that were live: where a restarted node looks for the session.
    public var addresses: [String]
    /// The epoch history (nil when this member held no key of it: removed).
    public var epochs: EpochMemory?
    /// The journal and the activity value. Like `epochs`, kept apart from the rest (which is
    /// written at every commit) and written only when they change; not in `encoded()`.
    public var journal: JournalMemory?
    public var activity: ActivityRecord?

    public init(member: MemberID, incarnation: UInt64, ownSeq: UInt64, counter: UInt64, delivered: [MemberID: UInt64],
                baseline: [MemberID: UInt64], nonApplication: [MemberID: UInt64], addresses: [String], epochs: EpochMemory?) {
        self.member = member; self.incarnation = incarnation; self.ownSeq = ownSeq; self.counter = counter
        self.delivered = delivered; self.baseline = baseline; self.nonApplication = nonApplication; self.addresses = addresses
        self.epochs = epochs
    }

    static let version: UInt8 = 1
    /// Most origins and addresses a point carries (far above any session's member limit).
    static let maximumEntries = 1 << 16

    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: 64 + 24 * delivered.count + 24 * addresses.count)
        w.u8(Self.version)
        w.member(member); w.u64(incarnation); w.u64(ownSeq); w.u64(counter); w.u64(datagramCounter)
        for map in [delivered, baseline, nonApplication] {
            w.u32(UInt32(truncatingIfNeeded: map.count))
            for (origin, seq) in map.sorted(by: { $0.key < $1.key }) { w.member(origin); w.u64(seq) }
        }
        w.u32(UInt32(truncatingIfNeeded: addresses.count))
        for addr in addresses { w.string16(addr) }
        if let epochs { w.u8(1); epochs.encode(into: &w) } else { w.u8(0) }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> ResumePoint {
        var r = WireReader(bytes)
        guard try r.u8("version") == version else { throw CoreError("unsupported resume point version") }
        let member = try r.member(), incarnation = try r.madeCount("incarnation")
        let ownSeq = try r.madeCount("own seq"), counter = try r.madeCount("counter"), datagramCounter = try r.madeCount("datagram counter")
        var maps: [[MemberID: UInt64]] = []
        for what in ["delivered", "baseline", "non-application counts"] {
            let n = Int(try r.u32(what))
            guard n <= maximumEntries else { throw CoreError("\(n) \(what) entries (at most \(maximumEntries))") }
            var map: [MemberID: UInt64] = [:]
            for _ in 0..<n { map[try r.member()] = try r.madeCount(what) }
            maps.append(map)
        }
        let n = Int(try r.u32("addresses"))
        guard n <= maximumEntries else { throw CoreError("\(n) addresses (at most \(maximumEntries))") }
        var addresses: [String] = []
        for _ in 0..<n { addresses.append(try r.string16("address", limit: MemberInfo.maximumAddress)) }
        let epochs: EpochMemory?
        switch try r.u8("epochs flag") {
        case 0: epochs = nil
        case 1: epochs = try EpochMemory.decode(from: &r)
        default: throw CoreError("bad epochs flag")
        }
        try r.expectEnd("resume point")
        var point = ResumePoint(member: member, incarnation: incarnation, ownSeq: ownSeq, counter: counter,
                                delivered: maps[0], baseline: maps[1], nonApplication: maps[2], addresses: addresses, epochs: epochs)
        point.datagramCounter = datagramCounter
        return point
    }
}

extension SessionCore {
    /// This member's resume point now (see `ResumePoint`), without the epoch memory (`epochs.memory`,
    /// which the shell writes only when `epochs.memoryRevision` changed).
    public var resumePoint: ResumePoint {
        var nonApplication: [MemberID: UInt64] = [:]
        for (origin, seq) in broadcast.delivered { nonApplication[origin] = applicationSeqs.nonApplication(origin, upTo: seq) }
        let addresses = swim.members.values.filter { $0.id != local && isLive($0.id) }.map(\.addr).sorted()
        var point = ResumePoint(member: local, incarnation: swim.local.incarnation, ownSeq: broadcast.ownSeq, counter: broadcast.counterValue,
                                delivered: broadcast.delivered, baseline: broadcast.baseline, nonApplication: nonApplication, addresses: addresses,
                                epochs: nil)
        point.datagramCounter = sessionDatagrams
        return point
    }

    /// Takes up where `point` left off: broadcast seqs, deliveries and their numbering, this
    /// member's stored broadcasts (`ownMessages`, to repair those who lack them), and the epoch
    /// history (its head, keys and removals; a memory of another session is ignored). Called once,
    /// before any input, on a core made with `joining: false` for the member `point` names (at an
    /// incarnation above `point.incarnation`).
    public mutating func resume(from point: ResumePoint, ownMessages: [SignedMessage]) {
        precondition(point.member == local, "a resume point of another member")
        // Message ids (directed and unreliable sends are not committed one by one): past any sent
        // after the last commit, as the datagram counter below, so no id is used twice.
        broadcast.resume(ownSeq: point.ownSeq, ownNonApplication: point.nonApplication[local] ?? 0,
                         counter: min(point.counter &+ Self.resumeCounterMargin, WireReader.madeCountLimit),
                         delivered: point.delivered, baseline: point.baseline, ownMessages: ownMessages)
        for (origin, seq) in point.delivered.sorted(by: { $0.key < $1.key }) where origin != local {
            applicationSeqs.start(origin, at: seq, count: point.nonApplication[origin] ?? 0)
        }
        applicationSeqs.start(local, at: point.ownSeq, count: point.nonApplication[local] ?? 0)
        if let memory = point.epochs { epochs.recall(memory, now: 0) }
        if let memory = point.journal { journal.recall(memory, now: 0) }
        // The value this member had shown before it stopped: taken up without an event.
        if let record = point.activity { _ = activity.apply(record) }
        // Peers keep a window of the counters they saw: past any sent after the last commit.
        sessionDatagrams = point.datagramCounter &+ Self.resumeCounterMargin
    }

    /// How far past the committed session-key datagram counter a resumed member starts (commits
    /// lag what was sent by at most a moment; a datagram with a counter seen before is refused).
    public static let resumeCounterMargin: UInt64 = 1 << 16
    /// How far past the committed incarnation a resumed member's record starts (a refutation made
    /// between two commits has already gone out at the next one).
    public static let resumeIncarnationMargin: UInt64 = 64
}
