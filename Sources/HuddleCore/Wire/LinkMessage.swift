import HuddleCrypto

/// Everything a member says to another over an established link. Encoded as
/// `version (1) | kind (1) | fields`; an unknown version or kind is a decode error, which closes the link.
public enum LinkMessage: Sendable, Equatable {
    /// First message on every link: the seq after which the receiver is to deliver the sender's
    /// broadcasts (`CausalBroadcast.helloSeq(for:)`; the receiver's baseline for it), and how many
    /// of the sender's broadcasts up to it were not messages (`ApplicationSeqs`).
    case hello(since: UInt64, nonApplication: UInt64)
    /// A SWIM push-pull: the sender's full membership state; the receiver merges it and answers
    /// with `pushPullReply` carrying its own.
    case pushPull(SWIMPushPull)
    case pushPullReply(SWIMPushPull)
    /// A SWIM message sent over the link as well as by datagram (used for `leave`, so it is not lost).
    case swim(SWIMMessage)
    /// A message signed by its origin, relayed alone (for repair) with its proof path.
    case message(SignedMessage)
    /// A flush of an origin's messages, sent by the origin: what of it is for the receiver, and the
    /// leaf hashes of the rest.
    case batch(SignedBatch)
    /// What the sender delivered and stores (anti-entropy; also its acknowledgements), and the
    /// stamp of its activity value.
    case digest(CausalBroadcast.Digest, activity: ActivityStamp?)
    /// Asks for `origin`'s stored messages `from...to`.
    case request(origin: MemberID, from: UInt64, to: UInt64)
    /// A joiner's starting point, from its sponsor: the sponsor's delivered clock, and per origin
    /// how many broadcasts up to it were not messages (`ApplicationSeqs`).
    case baseline([MemberID: UInt64], nonApplication: [MemberID: UInt64])
    /// The session's activity value.
    case activity(ActivityRecord)
    /// A joiner's copy of the journal, from its sponsor: every live attachment, in as many of these
    /// as it takes (`journalParts`), before the last part of the sponsor's push-pull reply.
    case journal([JournalEntry])
    /// Which chunks of an attachment the sender holds, and which it offers this receiver.
    case have(id: String, have: Bitfield, offer: Bitfield)
    case chunkRequest(id: String, index: UInt32)
    /// The copy of a chunk the receiver of this message sent failed its hash: it should check its own.
    case chunkCorrupt(id: String, index: UInt32)
    /// Heads the `length` bytes of chunk `index` that follow as raw frames: the body is already
    /// encrypted by its uploader and checked against the manifest, so the link does not encrypt
    /// it again; this header is encrypted and authenticated like every link message.
    case chunkHeader(id: String, index: UInt32, length: UInt32)
    /// Epoch changes (issue 21), parent first: a member passes on every change that moved it, and
    /// hands a member behind the changes it missed. Each is signed by its maker and checked by
    /// `EpochHistory`, so any member may relay them.
    case epochChanges([EpochChange])
    /// The current epoch key sealed to the receiver's node key, for a member behind that the
    /// current roster leaves out (`EpochHistory.handover`).
    case epochGrant(EpochGrant)
    /// The epoch the sender is on (its head) and whether it holds that epoch's key: sent right
    /// after the hello on every link and whenever the sender moves. A peer on another head, or
    /// without the key, is handed what it misses.
    case epochHead(epoch: UInt64, head: [UInt8], holdsKey: Bool)
    /// Asks for the receiver's wall clock (`LinkTiming`): carries the sender's, in microseconds
    /// since 1970, which the answer echoes.
    case timeRequest(wallMicros: UInt64)
    /// Answers a `timeRequest`: its wall time echoed, and the sender's wall clock when it answered.
    /// A peer's wall time is clamped to `LinkTiming.maximumWallMicros` when decoded, never refused:
    /// a host whose clock is far off is what `huddle doctor` is there to report.
    case timeReply(echo: UInt64, wallMicros: UInt64)
    /// The sender's participating programs (issue 38), signed by it: sent on every link when they
    /// change and once on a new link (`SessionCore+Participants`).
    case participants(ParticipantRecord)
    /// Where the sender sees the receiver's traffic come from (issue 36): the source `host:port` of
    /// the receiver's link connection and of its datagrams (empty: not seen). Each at most
    /// `MemberInfo.maximumAddress` bytes; the core keeps only numeric ones (`ReachObservations`).
    case observed(link: String, datagram: String)
    /// Relaying (issue 36, item 2; `RelayCircuits`, `RelayRoutes`): the sender asks the receiver
    /// (the relay) for a circuit to `peer`, a member it cannot link to directly.
    case circuitRequest(peer: MemberID)
    /// The relay offers the receiver a circuit from `peer`, which asked for one.
    case circuitOffer(peer: MemberID)
    /// The circuit with `peer` is taken (an end to the relay; the relay to the asking end).
    case circuitAccept(peer: MemberID)
    /// No circuit with `peer`, and why (a `RelayCircuits.Refusal` or `RelayRoutes` reason; at
    /// most `MemberInfo.maximumAddress` bytes, shown only in logs).
    case circuitRefuse(peer: MemberID, reason: String)
    /// Bytes of the link with `peer` that this circuit carries: ciphertext of that link (its own
    /// Noise session end to end), opaque to the relay. At most `circuitDataLimit` bytes.
    case circuitData(peer: MemberID, bytes: [UInt8])
    /// The circuit with `peer` is closed.
    case circuitClose(peer: MemberID)
    /// Hole punching (issue 36, item 3; `HolePunch`): one step of attempt `attempt` between the
    /// two ends of a relayed link, sent over that link. `addrs`: the sender's own addresses to
    /// dial (`SessionCore.punchAddresses`, with `connect` and `reply`): at most
    /// `MemberInfo.maximumReach`, each at most `MemberInfo.maximumAddress` bytes; encoded after the
    /// step (its high bit set) only when there are any (a step without is the encoding of old).
    case punch(attempt: UInt32, step: HolePunch.Step, addrs: [String] = [])

    /// The high bit of a `punch` step byte: addresses follow (a count, then each as a string16).
    static let punchAddressesFlag: UInt8 = 0x80
    /// The sender has delivered the receiver's directed messages up to counter `through`: the
    /// receiver stops keeping them for a resend (`DirectedOutbox`).
    case directedAck(through: UInt64)
    /// An unreliable application message over the link, for a recipient whose datagrams may not
    /// arrive (a relayed link, or one from behind a NAT): best effort as a datagram is — never
    /// resent, never ordered — and bounded as one (`SessionCore.Limits.unreliable`).
    case unreliable(WireMessage)

    /// Most bytes one `circuitData` carries.
    public static let circuitDataLimit = 60 * 1024

    /// Most epoch changes one `epochChanges` message carries.
    public static let maximumEpochChanges = 16

    public static let version: UInt8 = 1

    private enum Kind: UInt8 {
        case hello = 1, pushPull = 2, message = 3, pushPullReply = 4, swim = 5, digest = 6, request = 7, baseline = 8, activity = 9
        case journal = 10, have = 11, chunkRequest = 12, chunkHeader = 13, batch = 14, chunkCorrupt = 15
        case epochChanges = 16, epochGrant = 17, epochHead = 18, timeRequest = 19, timeReply = 20, participants = 21
        case observed = 30
        case circuitRequest = 31, circuitOffer = 32, circuitAccept = 33, circuitRefuse = 34, circuitData = 35, circuitClose = 36
        case punch = 37
        case directedAck = 38
        case unreliable = 39
    }

    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: estimatedSize)
        w.u8(Self.version)
        switch self {
        case let .hello(since, nonApplication):
            w.u8(Kind.hello.rawValue); w.u64(since); w.u64(nonApplication)
        case let .pushPull(state):
            w.u8(Kind.pushPull.rawValue); w.raw(state.encode())
        case let .pushPullReply(state):
            w.u8(Kind.pushPullReply.rawValue); w.raw(state.encode())
        case let .swim(message):
            w.u8(Kind.swim.rawValue); w.raw(message.encode())
        case let .message(m):
            w.u8(Kind.message.rawValue); m.encode(into: &w)
        case let .batch(batch):
            w.u8(Kind.batch.rawValue); batch.encode(into: &w)
        case let .digest(digest, activity):
            w.u8(Kind.digest.rawValue)
            Self.encode(digest.delivered, into: &w)
            Self.encode(digest.storedFrom, into: &w)
            w.u64(digest.ownNonApplication)
            if let activity { w.u8(1); w.u64(activity.lamport); w.member(activity.member) } else { w.u8(0) }
        case let .request(origin, from, to):
            w.u8(Kind.request.rawValue); w.member(origin); w.u64(from); w.u64(to)
        case let .baseline(clock, nonApplication):
            w.u8(Kind.baseline.rawValue); Self.encode(clock, into: &w); Self.encode(nonApplication, into: &w)
        case let .activity(record):
            w.u8(Kind.activity.rawValue); record.encode(into: &w)
        case let .journal(entries):
            w.u8(Kind.journal.rawValue); w.u32(UInt32(entries.count))
            for entry in entries { w.bytes32(entry.encoded()) }
        case let .have(id, have, offer):
            w.u8(Kind.have.rawValue); w.string16(id); w.u32(UInt32(have.count)); w.raw(have.bytes); w.raw(offer.bytes)
        case let .chunkRequest(id, index):
            w.u8(Kind.chunkRequest.rawValue); w.string16(id); w.u32(index)
        case let .chunkCorrupt(id, index):
            w.u8(Kind.chunkCorrupt.rawValue); w.string16(id); w.u32(index)
        case let .chunkHeader(id, index, length):
            w.u8(Kind.chunkHeader.rawValue); w.string16(id); w.u32(index); w.u32(length)
        case let .epochChanges(changes):
            w.u8(Kind.epochChanges.rawValue); w.u16(UInt16(truncatingIfNeeded: changes.count))
            for change in changes { change.encode(into: &w) }
        case let .epochGrant(grant):
            w.u8(Kind.epochGrant.rawValue); grant.encode(into: &w)
        case let .epochHead(epoch, head, holdsKey):
            w.u8(Kind.epochHead.rawValue); w.u64(epoch); w.raw(head); w.u8(holdsKey ? 1 : 0)
        case let .timeRequest(wall):
            w.u8(Kind.timeRequest.rawValue); w.u64(wall)
        case let .timeReply(echo, wall):
            w.u8(Kind.timeReply.rawValue); w.u64(echo); w.u64(wall)
        case let .participants(record):
            w.u8(Kind.participants.rawValue); record.encode(into: &w)
        case let .observed(link, datagram):
            w.u8(Kind.observed.rawValue); w.string16(link); w.string16(datagram)
        case let .circuitRequest(peer): w.u8(Kind.circuitRequest.rawValue); w.member(peer)
        case let .circuitOffer(peer): w.u8(Kind.circuitOffer.rawValue); w.member(peer)
        case let .circuitAccept(peer): w.u8(Kind.circuitAccept.rawValue); w.member(peer)
        case let .circuitRefuse(peer, reason): w.u8(Kind.circuitRefuse.rawValue); w.member(peer); w.string16(String(reason.utf8.prefix(MemberInfo.maximumAddress)) ?? "")
        case let .circuitData(peer, bytes): w.u8(Kind.circuitData.rawValue); w.member(peer); w.bytes32(bytes)
        case let .circuitClose(peer): w.u8(Kind.circuitClose.rawValue); w.member(peer)
        case let .punch(attempt, step, addrs):
            // With addresses, the step's high bit says so and a count (1...maximumReach) follows:
            // a step without is byte for byte the encoding of old, and a cut anywhere is an error.
            let sent = addrs.filter { $0.utf8.count <= MemberInfo.maximumAddress }.prefix(MemberInfo.maximumReach)
            w.u8(Kind.punch.rawValue); w.u32(attempt); w.u8(step.rawValue | (sent.isEmpty ? 0 : Self.punchAddressesFlag))
            if !sent.isEmpty {
                w.u8(UInt8(sent.count))
                for addr in sent { w.string16(addr) }
            }
        case let .directedAck(through): w.u8(Kind.directedAck.rawValue); w.u64(through)
        case let .unreliable(m): w.u8(Kind.unreliable.rawValue); m.encode(into: &w)
        }
        return w.bytes
    }

    /// Roughly the encoded size, so that encoding a large message does not grow its buffer by doubling.
    private var estimatedSize: Int {
        switch self {
        case let .batch(batch): 128 + batch.tree.count * 33 + batch.messages.reduce(0) { $0 + $1.message.body.count + 64 }
        case let .message(signed): 512 + signed.message.body.count
        case let .epochChanges(changes): 64 + changes.reduce(0) { $0 + 256 + $1.recipients.count * 120 }
        case let .circuitData(_, bytes): 16 + bytes.count
        case let .unreliable(m): 128 + m.body.count
        default: 64
        }
    }

    /// Whether an encoded link message carries an application message (for byte counters by kind).
    public static func carriesApplicationMessage(_ encoded: [UInt8]) -> Bool {
        encoded.count > 1 && (encoded[1] == Kind.message.rawValue || encoded[1] == Kind.batch.rawValue || encoded[1] == Kind.unreliable.rawValue)
    }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> LinkMessage {
        var r = WireReader(bytes)
        let version = try r.u8("version")
        guard version == Self.version else { throw CoreError("unsupported link message version \(version)") }
        let result: LinkMessage
        switch Kind(rawValue: try r.u8("kind")) {
        case .hello: result = .hello(since: try r.madeCount("seq"), nonApplication: try r.madeCount("non-application count"))
        case .pushPull: result = .pushPull(try SWIMPushPull.decode(try r.raw(r.remaining)))
        case .pushPullReply: result = .pushPullReply(try SWIMPushPull.decode(try r.raw(r.remaining)))
        case .swim: result = .swim(try SWIMMessage.decode(try r.raw(r.remaining)))
        case .message: result = .message(try SignedMessage.decode(from: &r))
        case .batch: result = .batch(try SignedBatch.decode(from: &r))
        case .digest:
            let digest = CausalBroadcast.Digest(delivered: try decodeClock(&r, made: false), storedFrom: try decodeClock(&r, made: false),
                                                ownNonApplication: try r.count("non-application count"))
            var stamp: ActivityStamp?
            switch try r.u8("activity flag") {
            case 0: stamp = nil
            case 1: stamp = ActivityStamp(lamport: try r.madeCount("lamport"), member: try r.member())
            default: throw CoreError("bad activity flag")
            }
            result = .digest(digest, activity: stamp)
        case .request: result = .request(origin: try r.member(), from: try r.count("from"), to: try r.count("to"))
        case .baseline: result = .baseline(try decodeClock(&r, made: true), nonApplication: try decodeClock(&r, made: true))
        case .activity: result = .activity(try ActivityRecord.decode(from: &r))
        case .journal:
            let n = Int(try r.u32("journal size"))
            guard n * 4 <= r.remaining else { throw CoreError("journal of \(n) entries is truncated") }
            var entries: [JournalEntry] = []
            for _ in 0..<n { entries.append(try JournalEntry.decode(try r.bytes32(limit: SessionCore.maximumJournalBody, "journal entry"))) }
            result = .journal(entries)
        case .have:
            let id = try r.string16("attachment id")
            let count = Int(try r.u32("chunk count"))
            guard count <= 1 << 20 else { throw CoreError("bitfield of \(count) chunks is too large") }
            let width = (count + 7) / 8
            guard let have = Bitfield(bytes: try r.raw(width, "bitfield"), count: count),
                  let offer = Bitfield(bytes: try r.raw(width, "bitfield"), count: count) else { throw CoreError("malformed bitfield") }
            result = .have(id: id, have: have, offer: offer)
        case .chunkRequest: result = .chunkRequest(id: try r.string16("attachment id"), index: try r.u32("chunk index"))
        case .chunkCorrupt: result = .chunkCorrupt(id: try r.string16("attachment id"), index: try r.u32("chunk index"))
        case .chunkHeader:
            result = .chunkHeader(id: try r.string16("attachment id"), index: try r.u32("chunk index"), length: try r.u32("chunk length"))
        case .epochChanges:
            let n = try r.count16(minItemSize: 1, "epoch changes")
            guard n <= maximumEpochChanges else { throw CoreError("\(n) epoch changes in one message (at most \(maximumEpochChanges))") }
            var changes: [EpochChange] = []
            for _ in 0..<n { changes.append(try EpochChange.decode(from: &r)) }
            result = .epochChanges(changes)
        case .epochGrant: result = .epochGrant(try EpochGrant.decode(from: &r))
        case .epochHead:
            let epoch = try r.count("epoch")
            let head = try r.raw(SessionKey.headLength, "epoch head")
            switch try r.u8("holds-key flag") {
            case 0: result = .epochHead(epoch: epoch, head: head, holdsKey: false)
            case 1: result = .epochHead(epoch: epoch, head: head, holdsKey: true)
            default: throw CoreError("bad holds-key flag")
            }
        case .timeRequest: result = .timeRequest(wallMicros: min(try r.u64("wall time"), LinkTiming.maximumWallMicros))
        case .timeReply:
            result = .timeReply(echo: min(try r.u64("echoed wall time"), LinkTiming.maximumWallMicros),
                                wallMicros: min(try r.u64("wall time"), LinkTiming.maximumWallMicros))
        case .participants: result = .participants(try ParticipantRecord.decode(from: &r))
        case .observed:
            result = .observed(link: try r.string16("observed link address", limit: MemberInfo.maximumAddress),
                               datagram: try r.string16("observed datagram address", limit: MemberInfo.maximumAddress))
        case .circuitRequest: result = .circuitRequest(peer: try r.member("circuit peer"))
        case .circuitOffer: result = .circuitOffer(peer: try r.member("circuit peer"))
        case .circuitAccept: result = .circuitAccept(peer: try r.member("circuit peer"))
        case .circuitRefuse:
            result = .circuitRefuse(peer: try r.member("circuit peer"), reason: try r.string16("circuit refusal", limit: MemberInfo.maximumAddress))
        case .circuitData: result = .circuitData(peer: try r.member("circuit peer"), bytes: try r.bytes32(limit: Self.circuitDataLimit, "circuit bytes"))
        case .circuitClose: result = .circuitClose(peer: try r.member("circuit peer"))
        case .punch:
            let attempt = try r.u32("punch attempt")
            let stepByte = try r.u8("punch step")
            guard let step = HolePunch.Step(rawValue: stepByte & ~Self.punchAddressesFlag) else { throw CoreError("unknown punch step") }
            var addrs: [String] = []
            if stepByte & Self.punchAddressesFlag != 0 {
                let n = Int(try r.u8("punch address count"))
                guard (1...MemberInfo.maximumReach).contains(n) else { throw CoreError("\(n) punch addresses (1 to \(MemberInfo.maximumReach))") }
                for _ in 0..<n { addrs.append(try r.string16("punch address", limit: MemberInfo.maximumAddress)) }
            }
            result = .punch(attempt: attempt, step: step, addrs: addrs)
        case .directedAck: result = .directedAck(through: try r.u64("directed counter"))
        case .unreliable: result = .unreliable(try WireMessage.decode(from: &r))
        case nil: throw CoreError("unknown link message kind")
        }
        try r.expectEnd("link message")
        return result
    }

    private static func encode(_ clock: [MemberID: UInt64], into w: inout WireWriter) {
        w.u16(UInt16(truncatingIfNeeded: clock.count))
        for (member, seq) in clock.sorted(by: { $0.key < $1.key }) { w.member(member); w.u64(seq) }
    }

    /// A clock; `made` when it is one a member adopts as its own starting point (a sponsor's
    /// baseline: `WireReader.madeCountLimit`), not one it only compares with (a digest).
    private static func decodeClock(_ r: inout WireReader, made: Bool) throws(CoreError) -> [MemberID: UInt64] {
        let n = try r.count16(minItemSize: 16, "clock")
        var clock: [MemberID: UInt64] = [:]
        for _ in 0..<n { clock[try r.member()] = made ? try r.madeCount("clock seq") : try r.count("clock seq") }
        return clock
    }
}
