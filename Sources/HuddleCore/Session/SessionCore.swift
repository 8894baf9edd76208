import HuddleCrypto

/// One member's protocol decisions in one pure value: it owns membership (SWIM), causal broadcast,
/// the journal, the activity register and link planning, **and the rules that join them**. It
/// reads no clock, socket or file; inputs come with `now`, decisions go out as `SessionEffect`s.
/// Its randomness is seeded by its maker (`swimSeed`, `journalSeed`, `epochRandom`), but for new
/// epoch keys when no `epochRandom` is given: those come from the system's secure generator (the
/// node gives none; the simulator and tests give a seeded one). (HANDBOOK.md, "The session core"; the node and the
/// simulator run this same value.) It holds this member's identity only to sign: Ed25519
/// signatures are deterministic, so the core stays a pure function of its inputs.
///
/// Guarantees, for the rules it holds today:
/// - the live members (alive or suspect) are one derived view of the membership table; every
///   membership change hands that same view to broadcast (stability, repair) and the journal
///   (holders, hand-off targets) before anything else happens;
/// - a member that joins, comes back or changes is wanted for a link (dialed by the lower id at
///   once); one that fails or leaves stops being dialed and its link is closed;
/// - the link hello names the seq from which this member knew the peer, and a peer's hello sets
///   the baseline for its broadcasts only if nothing earlier did;
/// - a link is admitted only for a member whose pinned node key is the one the handshake proved
///   (never for itself, never for a member that left);
/// - a catch-up (baseline, journal) is taken only from a peer this member asked for one (a join
///   push-pull), and only until the last part of that peer's reply; a baseline only while one is
///   awaited; a catch-up and a push-pull go in parts each within the link's message limit, so a
///   joiner learns every attachment however large the journal;
/// - a journal entry that adds an attachment is applied only when its manifest commits to the key
///   it carries and names as uploader the member whose pinned node key signed it;
/// - every peer has a budget (`SessionCore+Budgets.swift`): a message body above the receive limit
///   is refused before it is verified or held; while a peer's link is backlogged (the shell says so)
///   its requests for bulk answers (chunks, repairs, push-pull state) are refused, and a repair
///   answer carries at most `repairAnswerBytes`; the hold-back (per origin), the member table, the
///   chunk reads in flight per peer and the store have their bounds in the cores that own them.
///   Every refusal is counted by reason, and the first of each becomes a `.refused` effect.
/// - the session key is the current epoch's (`SessionCore+Epochs`): a link is admitted only for the
///   epoch its handshake's key proves and a node key the epoch rules let in; a removed node key is
///   out of `live`, never linked, its datagrams refused; a removed member decides nothing more;
/// - a datagram has a member's authority only under the keys of this member's link with it; the
///   session-key form carries only a bare ping or the ack to this member's own probe, and only
///   from a member it holds no link keys with (`SessionCore+Datagrams`).
public struct SessionCore: Sendable {
    public let local: MemberID
    let identity: Identity
    public let limits: Limits
    public internal(set) var swim: SWIMInstance
    public internal(set) var broadcast: CausalBroadcast
    public internal(set) var journal: Journal
    public internal(set) var activity = ActivityRegister()
    /// Which programs take part in activities, here and on linked members (`SessionCore+Participants`).
    public internal(set) var presence = ParticipantTable()
    public internal(set) var planner: LinkPlanner
    /// Per linked member, its link's round-trip time and its clock skew (`SessionCore+Timing`).
    public internal(set) var timing = LinkTiming()
    /// Broadcast seqs to the application seqs of the control protocol (journal entries skipped).
    public internal(set) var applicationSeqs = ApplicationSeqs()
    /// This member's pairing invitations (issue 22).
    public internal(set) var invitations = InvitationBook()
    /// The session's epoch history (issue 21, `SessionCore+Epochs`): the current key, who is removed.
    public internal(set) var epochs: EpochHistory
    /// Per linked peer, its node key and the head of the epoch whose key its link's handshake proved.
    var epochLinks: [MemberID: (node: [UInt8], keyHead: [UInt8])] = [:]
    /// Per linked peer, which end dialed its link (the duplicate rule, `linkEstablished`).
    var linkDialers: [MemberID: MemberID] = [:]
    /// Per linked peer, the epoch head it last said it is on (`LinkMessage.epochHead`).
    public internal(set) var peerHeads: [MemberID: [UInt8]] = [:]
    /// Per linked peer, whether its last `epochHead` said it holds that epoch's key.
    var peerHoldsKey: [MemberID: Bool] = [:]
    /// Per linked peer, the heads (its and this member's) of the last hand-over its `epochHead`
    /// asked for, and when: one hand-over per peer per `handoverInterval`, whatever heads it names.
    var headHandovers: [MemberID: (theirs: [UInt8], mine: [UInt8], at: Double)] = [:]
    /// Per linked peer, when a hand-over its later `epochHead` asked for within the interval is due
    /// (made then by `epochTick`, if the peer still needs it).
    var handoversDue: [MemberID: Double] = [:]
    /// Members whose node key is removed: out of `live`, never linked, their events not shown.
    public internal(set) var removedMembers: Set<MemberID> = [] { didSet { removedVersion &+= 1 } }
    /// Changes with every change to `removedMembers` (what `LinkView` is keyed by).
    public private(set) var removedVersion: UInt64 = 0
    /// Where new epoch keys and grants' ephemeral keys come from (the node: the system's secure
    /// generator; the simulator: a seeded one).
    var epochRandom: any RandomNumberGenerator & Sendable
    /// `huddle run --rekey-every`: seconds an epoch lasts before this member rotates (nil: never).
    public internal(set) var rekeyEvery: Double?
    /// When this member's next routine rotation is due (the current epoch's start, plus
    /// `rekeyEvery` and up to a quarter more, drawn at random so members rarely rotate at once).
    var rekeyAt = Double.infinity
    /// Seconds a link must have been up for its loss to say something about the peer (`linkDown`'s
    /// `settled`, `isSettled(upFor:)`): one that fails sooner failed its start, not its peer.
    public static let linkSettling = 1.0
    /// Whether a link that was up `seconds` has settled (`linkSettling`).
    public static func isSettled(upFor seconds: Double) -> Bool { seconds >= linkSettling }
    /// The shortest wait between two ticks, whatever `nextDeadline` says: a deadline that does not
    /// move cannot spin the shell.
    public static let minimumTickGap = 0.005
    /// How often the journal runs (chunk requests, haves, states) and a digest goes to every link.
    public static let journalInterval = 0.05
    public static let digestInterval = 0.1
    /// A digest that has not changed since the last one goes out only this often (and at once on
    /// a link that has not had it): at N members, ten digests a second on every link cost N
    /// clocks of N entries per member per 0.1 s even when the session is quiet.
    public static let digestRefresh = 1.0
    /// The last digest sent on every link, when, and the links that have had it since.
    private var lastDigest: LinkMessage?
    private var lastDigestAt = -Double.infinity
    private var digestSentTo: Set<MemberID> = []
    private var journalAt = -Double.infinity
    /// The last `LinkView` worked out (`linkView()`).
    var linkViewCache: LinkView?
    private var digestAt = -Double.infinity
    /// Per origin, bytes of its broadcasts delivered here since a digest last went to it, and when
    /// one last went to it early (`progressDigests`). Only members' messages are delivered, so
    /// it has at most one entry per member.
    var deliveredSinceDigest: [MemberID: Int] = [:]
    var progressDigestAt: [MemberID: Double] = [:]
    /// Some origin in `deliveredSinceDigest` reached `progressDigestBytes`: only then does an
    /// input look through the table.
    var progressDigestDue = false
    /// Seconds to add to `now` for the wall clock (seconds since 1970): the activity's hybrid
    /// Lamport times (`ActivityRegister`). The shell sets it (`setWallClock`); 0 reads `now` as the
    /// wall clock (the simulator, pure tests).
    public internal(set) var wallClockOffset: Double = 0
    /// Per linked peer, the activity stamp last sent to it in answer to its digest, and when: a
    /// peer whose digests stay behind is sent the record again only every `activityResend`, not
    /// at every digest (a 26-byte digest used to queue a record of up to 64 KiB each time: a
    /// member that sent digests and never read took a node from 46 MB to 811 MB in 24 s).
    var activitySentTo: [MemberID: (stamp: ActivityStamp, at: Double)] = [:]
    /// How long before a peer whose digests still show an older activity is sent the record again
    /// (it was lost with a link, or refused as ahead of the peer's clock).
    public static let activityResend = 2.0
    /// Per claimed sender of session-key datagrams, the counters seen; at most
    /// `replayWindowLimit` senders, members first. (Link-keyed datagrams are checked per key, in
    /// `datagramKeys`.)
    var replayWindows: [MemberID: ReplayWindow] = [:]
    public static let replayWindowLimit = 4096
    /// The datagram keys of this member's links: who may send it what (`SessionCore+Datagrams`).
    public internal(set) var datagramKeys = DatagramKeyring()
    /// The counter of this member's session-key datagrams (link-keyed ones count per key).
    var sessionDatagrams: UInt64 = 0
    /// The UDP source address each member's link-keyed datagrams last came from, where it is not
    /// the address it advertises (so an answer sent there is sealed for it).
    var datagramSources: [String: MemberID] = [:]
    /// Batch roots whose signature was checked.
    var verifiedRoots = VerifiedRoots()
    /// This member's messages since the last flush: signed together, then sent on its links.
    var pendingBatch: [WireMessage] = []
    /// Body bytes in `pendingBatch` (a batch is flushed before it would pass `batchBytes`).
    var pendingBatchBytes = 0
    /// Observed addresses and the NAT kind (`SessionCore+Reach`).
    public internal(set) var reach = ReachObservations()
    /// This member as a relay (`SessionCore+Relay`), and as an end of circuits.
    public internal(set) var relay: RelayCircuits
    public internal(set) var routes: RelayRoutes
    /// Members whose link runs over a circuit, and through which relay.
    var relayedLinks: [MemberID: MemberID] = [:]
    /// Datagram paths to members behind NATs or relays (`SessionCore+UDPPaths`).
    public internal(set) var udpPaths = UDPPaths()
    /// Hole punching between the ends of relayed links (`SessionCore+Punch`).
    public internal(set) var punch: HolePunch
    /// Peers asked to catch this member up (a join push-pull), until their reply: only they may
    /// send a baseline or journal entries.
    public private(set) var catchUpFrom: Set<MemberID> = []
    /// When this member last asked a peer for the membership it lacks (`catchUpMembership`).
    var membershipAskedAt = -Double.infinity
    /// Turns of `membershipCatchUpTick`: which linked member it asks next.
    var membershipAskRound: UInt64 = 0
    /// How often at most a peer is asked for membership this member lacks: a message from or
    /// depending on a member not heard of, or a circuit offered from one, asks at once (gossip of
    /// a new member can take longer than `CausalBroadcast.Settings.unknownOriginWait` to reach a
    /// member behind a NAT while many join), and one that names made-up members costs one
    /// push-pull per this many seconds.
    public static let membershipAskGap = 1.0
    /// Inputs refused by this core, by reason (membership's own are in `swim.refusals`).
    public internal(set) var ownRefusals = RefusalCounts()
    /// Every input refused, by reason: this core's, membership's, broadcast's and the journal's.
    public var refusals: RefusalCounts { ownRefusals.adding(swim.refusals).adding(broadcast.refusals).adding(journal.refusals) }
    /// Link messages refused because their sender had no right to send them (a catch-up nobody
    /// asked for, a journal entry naming another uploader, a link for a pinned member id).
    public var refusedLinkMessages: Int {
        ownRefusals[.unsolicitedCatchUp] + ownRefusals[.journalNotByUploader] + ownRefusals[.linkForPinnedMember] + ownRefusals[.recordNodeKey]
    }

    /// `joining`: this member waits for a sponsor's baseline before delivering anything.
    /// `identity` is this member's key pair (its public half is `local.node`).
    /// `sessionKey`: the key this member holds (its key file's epoch; a fixed epoch-0 key when nil,
    /// for tests that do not look at epochs; it carries the admin set, issue 33); `epochSettings`: grace and bounds (`EpochSettings`).
    public init(local: MemberInfo, identity: Identity, limits: Limits = Limits(), settings: SWIMSettings = .lan, joining: Bool, swimSeed: UInt64, journalSeed: UInt64,
                sessionKey: SessionKey? = nil, epochSettings: EpochSettings = EpochSettings(), epochRandom: (any RandomNumberGenerator & Sendable)? = nil) {
        self.local = local.id
        epochs = EpochHistory(key: sessionKey ?? Self.placeholderKey, identity: identity, local: local.id, settings: epochSettings)
        self.epochRandom = epochRandom ?? SystemRandomNumberGenerator()
        self.identity = identity
        self.limits = limits
        var settings = settings
        settings.memberLimit = limits.members
        swim = SWIMInstance(local: local, settings: settings, seed: swimSeed, signer: NodeKeySigner(identity))
        var broadcastSettings = CausalBroadcast.Settings()
        broadcastSettings.holdbackBytesPerOrigin = limits.holdbackBytesPerOrigin
        broadcastSettings.ackDeadline = limits.ackDeadline
        broadcast = CausalBroadcast(local: local.id, awaitingBaseline: joining, settings: broadcastSettings)
        journal = Journal(local: local.id, seed: journalSeed, storeLimitBytes: limits.storeBytes)
        planner = LinkPlanner(local: local.id)
        relay = RelayCircuits(local: local.id)
        routes = RelayRoutes(local: local.id)
        punch = HolePunch(local: local.id)
    }

    // MARK: membership

    /// Members that count as in the session: alive or merely suspected.
    /// A member whose node key is removed is never live, whatever membership says.
    public var live: Set<MemberID> {
        var out = Set<MemberID>(minimumCapacity: swim.members.count)
        for (id, info) in swim.members where (info.state == .alive || info.state == .suspect) && !removedMembers.contains(id) { out.insert(id) }
        return out
    }

    public func isLive(_ member: MemberID) -> Bool {
        guard let info = swim.members[member], !removedMembers.contains(member) else { return false }
        return info.state == .alive || info.state == .suspect
    }

    /// Everything due at `now`, in this order: retired datagram keys expire; membership (SWIM's
    /// probes and timeouts) and the planner's dials; every `journalInterval` the journal, time requests
    /// and directed-message acks to linked live members; every `digestInterval` the digest of
    /// broadcast and activity to links; this member's participant record when it changed; reach
    /// reports and publishing, relay circuits, hole punching, UDP paths and the membership
    /// catch-up; the epoch work that is due; and `.congestionCleared` when the input cleared it.
    /// A removed member returns nothing. Work with no deadline of its own in `nextDeadline` (reach,
    /// relay, UDP paths, participant records, the catch-up) runs at the next tick, at most
    /// `journalInterval` later.
    public mutating func tick(now: Double) -> [SessionEffect] {
        // A removed member is out of the session: it decides nothing more.
        if epochs.isRemoved { return [] }
        let congested = broadcast.isCongested
        datagramKeys.expire(now: now)
        var out = membership(swim.tick(now: now), now: now) + planner.tick(now: now).map { .dial($0.addr, pushPull: nil) }
        // Compared as `nextDeadline` computes them, so a tick at that deadline always does the work
        // (`now - at >= interval` can round below the interval there, and the shell would spin).
        if now >= journalAt + Self.journalInterval {
            journalAt = now
            let linked = linkView().linkedLive
            out += journal.tick(now: now, linked: linked).map(SessionEffect.journal)
            out += timingTick(linked, now: now)
            out += broadcast.directedAcks(linked: linked).map { SessionEffect.sendLink($0.0, .directedAck(through: $0.1)) }
        }
        if now >= digestAt + Self.digestInterval, !planner.linked.isEmpty {
            digestAt = now
            out += digests(now: now)
        }
        out += sendParticipantRecord()
        out += reachReports(now: now) + publishReach(now: now) + relayTick(now: now) + punchTick(now: now) + udpPathTick(now: now)
            + membershipCatchUpTick(now: now)
        return out + epochTick(now: now) + congestionCleared(since: congested)
    }

    /// The digest of broadcast and activity: to every link when it changed (or `digestRefresh`
    /// passed), else only to links that have not had it yet.
    private mutating func digests(now: Double) -> [SessionEffect] {
        let digest = LinkMessage.digest(broadcast.digest(), activity: activity.stamp)
        if digest != lastDigest || now >= lastDigestAt + Self.digestRefresh {
            lastDigest = digest
            lastDigestAt = now
            digestSentTo = planner.linked
            deliveredSinceDigest.removeAll(keepingCapacity: true)
            progressDigestDue = false
            return [.sendToLinks(digest)]
        }
        let fresh = planner.linked.subtracting(digestSentTo).sorted()
        digestSentTo.formUnion(fresh)
        return fresh.map { .sendLink($0, digest) }
    }

    /// `.congestionCleared` when broadcast was congested before an input and is not after it.
    func congestionCleared(since wasCongested: Bool) -> [SessionEffect] {
        wasCongested && !broadcast.isCongested ? [.congestionCleared] : []
    }

    /// When `tick` next has work (never, for a removed member): the earliest of SWIM's deadline, the next journal tick (never
    /// more than `journalInterval` away), the next digest (only while a link is up), the expiry of
    /// retired datagram keys, the epoch work (`epochDeadline`) and hole punching's next step. The
    /// shared shell arms its timer for it after every input (`SessionShell.rearm`).
    public var nextDeadline: Double {
        // A removed member decides nothing more (`tick`): nothing is ever due.
        if epochs.isRemoved { return .infinity }
        let digest = planner.linked.isEmpty ? Double.infinity : digestAt + Self.digestInterval
        return min(swim.nextDeadline, journalAt + Self.journalInterval, digest, datagramKeys.nextExpiry, epochDeadline, punch.nextDeadline)
    }

    /// Live members with a link up, in member order.
    public var linkedLive: [MemberID] { planner.linked.filter { isLive($0) }.sorted() }
    public mutating func receive(_ message: SWIMMessage, from addr: String, now: Double) -> [SessionEffect] {
        membership(swim.receive(message, from: addr, now: now), now: now)
    }
    public mutating func receivePushPull(_ state: SWIMPushPull, from addr: String, now: Double) -> [SessionEffect] {
        membership(swim.receivePushPull(state.members, join: state.join, from: addr, now: now), now: now)
    }

    /// A push-pull that arrived over the link to `peer` (at `addr`). A part with `more` to follow
    /// is only merged. At the last part, a joiner's (`join`) is first caught up — this member's
    /// clock as its baseline, the journal, the activity — then the part is merged, and answered
    /// with this member's state after the merge. The journal and the answer go in parts within
    /// the link's message limit (`LinkMessage.journalParts`, `SWIMPushPull.parts`), the answer's
    /// last part last: the joiner takes the catch-up until then.
    public mutating func linkPushPull(_ state: SWIMPushPull, from peer: MemberID, addr: String, now: Double) -> [SessionEffect] {
        var out: [SessionEffect] = []
        if state.join && !state.more {
            let clock = broadcast.delivered
            let counts = Dictionary(uniqueKeysWithValues: clock.map { ($0.key, applicationSeqs.nonApplication($0.key, upTo: $0.value)) })
            out.append(.sendLink(peer, .baseline(clock, nonApplication: counts)))
            out += LinkMessage.journalParts(journal.entries).map { .sendLink(peer, $0) }
            if let record = activity.current { out.append(.sendLink(peer, .activity(record))) }
        }
        let merged = membership(swim.receivePushPull(state.members, join: state.join, from: addr, now: now), now: now)
        if !state.more {
            out += SWIMPushPull.parts(join: state.join, members: swim.pushPullState()).map { .sendLink(peer, .pushPullReply($0)) }
        }
        return out + merged + forwardJoiner(peer, joined: merged)
    }

    /// The sponsor of a joiner that this push-pull made known passes the joiner's signed record on
    /// over every link at once. Gossip alone spreads a signed record (about 140 bytes, 7 to a
    /// datagram) slowly when many members join together, and a member cannot deliver a message
    /// that depends on an origin it has not heard of: at N = 100 starting within 1 s, an attachment
    /// reached every member 3.6 s after it was added instead of 0.16 s. Once per member (only when
    /// it is first known), so repeated push-pulls are not multiplied.
    private func forwardJoiner(_ peer: MemberID, joined effects: [SessionEffect]) -> [SessionEffect] {
        for case let .member(.joined, info) in effects where info.id == peer {
            return [.sendToLinks(.swim(SWIMMessage(sender: local, kind: .gossip, gossip: [.alive(info)])))]
        }
        return []
    }

    /// Whether every member known at `addr` is removed (and at least one is): nothing goes there.
    func onlyRemovedMembersAt(_ addr: String) -> Bool {
        let there = swim.members.values.filter { $0.addr == addr }
        return !there.isEmpty && there.allSatisfy { removedMembers.contains($0.id) }
    }

    /// A member is gone here (failed, left or removed): link planning, relay routes, hole punching,
    /// clock offsets and its datagram keys forget it, and its link is to close. One rule for
    /// membership's departures and for evictions (`evict`).
    mutating func forgetMember(_ id: MemberID) -> SessionEffect {
        planner.forget(id)
        routes.forget(id)
        punch.forget(id)
        timing.forget(id)
        datagramKeys.forget(id)
        return .closeLink(id)
    }

    /// Carries out what membership decided, and its consequences for the other cores.
    mutating func membership(_ effects: [SWIMEffect], now: Double) -> [SessionEffect] {
        var out: [SessionEffect] = []
        for effect in effects {
            switch effect {
            case let .send(message, to): if let datagram = datagram(message, to: to) { out.append(datagram) }
            case let .pushPull(addr, member, join):
                // Re-merge retries a failed member's address; a removed member's is never dialled.
                if !join && onlyRemovedMembersAt(addr) { continue }
                // Over the link to the member SWIM chose when that member is live and linked (by
                // its id: an address is only what records claim), else after a dial, whose
                // handshake proves who is there.
                if let member, planner.linked.contains(member), isLive(member) {
                    out += pushPullRequest(to: member, join: join).map { .sendLink(member, $0) }
                } else {
                    out.append(.dial(addr, pushPull: join))
                }
            case let .refused(reason): out.append(.refused(reason))
            case let .emit(change, info):
                // A removed node key's records (gossiped on by members that have not heard yet)
                // show nothing and bring no link back.
                if epochs.removedNodes[info.node] != nil {
                    out += evict(info, report: false, now: now)
                    continue
                }
                out.append(.member(change, info))
                let live = self.live
                out += broadcastEffects(broadcast.setMembers(live, now: now), now: now)
                if change == .left { broadcast.memberLeft(info.id, now: now) }
                journal.setPeers(live, now: now)
                switch change {
                case .joined, .alive, .updated, .suspect:
                    // Its own signed record: its node key counts as seen, carried into the next epoch.
                    if change != .suspect { epochs.observe(info.node, now: now) }
                    if let dial = planner.want(info.id, addr: info.addr, now: now) { out.append(.dial(dial.addr, pushPull: nil)) }
                case .failed, .left, .removed: out.append(forgetMember(info.id))
                case .path: break  // not membership's (SessionCore+Reach)
                }
                out += participantsAfter(change, of: info.id)
            }
        }
        return out
    }

    // MARK: links

    /// Most links up at once to peers that are not in the member table.
    public static let strangerLinkLimit = 64

    /// Whether a link whose handshake proved `peer.node` may serve as the link to member `peer.id`.
    /// `keyHead`: the head of the epoch whose key the handshake used (nil: the current one).
    public mutating func admitLink(_ peer: MemberInfo, keyHead: [UInt8]? = nil, now: Double = 0) throws(CoreError) {
        if peer.id == local { throw .linkToSelf }
        // Its address is where answers to what comes over the link go: never a name to look up.
        guard HostPort.isNumeric(peer.addr) else {
            ownRefusals.add(.hostnameAddress)
            throw .hostnameAddress
        }
        try admitEpoch(peer, keyHead: keyHead, now: now)
        guard let known = swim.members[peer.id] else {
            // A joiner links before it is a member (its push-pull comes over the link): a few such
            // links at once, so that invented member ids cannot open links without bound (links
            // to members are bounded by the member table).
            let strangers = planner.linked.count { swim.members[$0] == nil }
            guard strangers < Self.strangerLinkLimit else {
                ownRefusals.add(.strangerLinks)
                throw .tooManyStrangers
            }
            return
        }
        if known.state == .left { throw .peerLeft }
        guard known.node == peer.node else {
            ownRefusals.add(.linkForPinnedMember)
            throw .anotherNodeKey
        }
    }

    /// The push-pull to send over the link to `peer`, in parts within the link's message limit
    /// (`SWIMPushPull.parts`). With `join`, `peer` is asked to catch this member up (baseline,
    /// journal, activity): only a peer asked may, until the last part of its reply.
    public mutating func pushPullRequest(to peer: MemberID, join: Bool) -> [LinkMessage] {
        if join { catchUpFrom.insert(peer) }
        return SWIMPushPull.parts(join: join, members: swim.pushPullState()).map(LinkMessage.pushPull)
    }

    /// A link to `peer` is up: returns the hello to send first — the seq it names
    /// (`CausalBroadcast.helloSeq(for:)`) and how many of this member's broadcasts up to it were
    /// not messages. `via`: the relay when the link runs over a circuit (`SessionCore+Relay`).
    public mutating func linkUp(_ peer: MemberID, via: MemberID? = nil, now: Double = 0) -> LinkMessage {
        planner.linkUp(peer, relayed: via != nil, now: now)
        relayLinkUp(peer, via: via)
        broadcast.directedLinkUp(peer)
        let seq = broadcast.helloSeq(for: peer)
        return .hello(since: seq, nonApplication: applicationSeqs.nonApplication(local, upTo: seq))
    }

    /// The link to `peer` closed. `settled`: it had been up long enough that its loss says
    /// something about the peer (membership then checks it at once). A relayed link's loss never
    /// does: its relay may have gone (a crashed relay closes every circuit through it, and their
    /// ends are alive), or stalled or closed it on purpose (a hostile relay must not make two
    /// members suspect each other), or the peer's end moved to a punched direct link and closed
    /// the circuit before that link reached this end. Probes, direct and indirect, decide then.
    public mutating func linkDown(_ peer: MemberID, settled: Bool, now: Double) -> [SessionEffect] {
        let settled = settled && relayedLinks[peer] == nil
        catchUpFrom.remove(peer)
        digestSentTo.remove(peer)
        activitySentTo[peer] = nil
        journal.linkDown(peer)
        planner.linkDown(peer)
        timing.linkDown(peer, keep: swim.members[peer] != nil)
        datagramKeys.retire(peer, now: now)
        epochLinks[peer] = nil
        linkDialers[peer] = nil
        peerHeads[peer] = nil
        udpPaths.linkDown(peer)
        peerHoldsKey[peer] = nil
        headHandovers[peer] = nil
        handoversDue[peer] = nil
        let gone = forgetParticipants(of: peer) + reachLinkDown(peer) + relayLinkDown(peer, now: now)
        return gone + (settled ? membership(swim.linkLost(peer, now: now), now: now) : [])
    }

    // MARK: broadcast

    /// A peer's hello: its broadcasts are delivered after `seq`, unless something earlier set where.
    public mutating func linkHello(from peer: MemberID, since seq: UInt64, nonApplication: UInt64, now: Double) -> [SessionEffect] {
        if broadcast.delivered[peer] == nil, peer != local { applicationSeqs.start(peer, at: seq, count: nonApplication) }
        return broadcastEffects(broadcast.linkHello(origin: peer, seq: seq), now: now)
    }
    /// A sponsor's clock: where this joiner starts for each origin.
    public mutating func adoptBaseline(_ clock: [MemberID: UInt64], nonApplication: [MemberID: UInt64], now: Double) -> [SessionEffect] {
        for (origin, seq) in clock.sorted(by: { $0.key < $1.key }) where origin != local && seq > (broadcast.delivered[origin] ?? 0) {
            applicationSeqs.start(origin, at: seq, count: nonApplication[origin] ?? 0)
        }
        return broadcastEffects(broadcast.adoptBaseline(clock), now: now)
    }

    /// The message as the control protocol shows it: its seq and its dependencies in application
    /// seqs (`ApplicationSeqs`). The same value, not a copy, when nothing changes (no journal entries).
    public func applicationView(_ m: WireMessage) -> WireMessage { applicationSeqs.view(m) }

    /// A clock (delivered, baseline) in application seqs.
    public func applicationClock(_ clock: [MemberID: UInt64]) -> [MemberID: UInt64] {
        clock.reduce(into: [:]) { $0[$1.key] = applicationSeqs.applicationSeq($1.key, $1.value) }
    }
    /// A peer's digest: its clock (repairs, acknowledgements) and its activity stamp — a peer
    /// behind this member's activity value (or without one) is sent the current record.
    public mutating func receiveDigest(_ digest: CausalBroadcast.Digest, activity stamp: ActivityStamp?, from peer: MemberID, now: Double) -> [SessionEffect] {
        var out = broadcastEffects(broadcast.receiveDigest(digest, from: peer, now: now), now: now)
        if let mine = activity.current, stamp.map({ $0 < mine.stamp }) ?? true {
            let sent = activitySentTo[peer]
            if sent?.stamp != mine.stamp || now - (sent?.at ?? -.infinity) >= Self.activityResend {
                activitySentTo[peer] = (mine.stamp, now)
                out.append(.sendLink(peer, .activity(mine)))
            }
        }
        return out
    }
    /// A message whose signature was verified (`receiveSigned`, `receiveBatch`).
    public mutating func receive(verified signed: SignedMessage, now: Double) -> [SessionEffect] {
        broadcastEffects(broadcast.receive(signed), now: now) + progressDigests(now: now)
    }

    /// What broadcast decided: application messages are delivered by the shell, journal entries
    /// are applied to the journal here, repair requests go to their peer.
    mutating func broadcastEffects(_ effects: [CausalBroadcast.Effect], now: Double) -> [SessionEffect] {
        var out: [SessionEffect] = []
        for effect in effects {
            switch effect {
            case let .deliver(signed):
                noteDelivered(signed.message)
                switch signed.message.kind {
                case .application: out.append(.deliver(signed))
                case .journal:
                    applicationSeqs.noteNonApplication(signed.message.origin, signed.message.seq)
                    if let entry = try? JournalEntry.decode(signed.message.body) {
                        out += applyJournalEntry(entry, announcedBy: signed.message.origin, now: now)
                    } else {
                        out.append(.unreadable(signed.message.origin, what: "journal entry"))
                    }
                case .activity: applicationSeqs.noteNonApplication(signed.message.origin, signed.message.seq)  // not sent as broadcasts today
                }
            case let .request(peer, origin, from, to): out.append(.repairRequest(peer: peer, origin: origin, from: from, to: to))
            case let .gap(origin, from, to, count):
                if let lost = applicationSeqs.skip(origin, from: from, to: to, nonApplicationThrough: count) {
                    out.append(.gap(member: origin, fromSeq: lost.lowerBound, toSeq: lost.upperBound))
                }
            }
        }
        return out
    }

    // MARK: one link message

    /// Everything a peer can say over its link, decided in one place. `addr` is the peer's
    /// advertised address. Chunk bodies are not here: the shell's link reader hands whole chunks
    /// to the journal.
    /// `backlogged`: the shell's queue to `peer` holds `LinkBudget.backlogBytes` or more, so its
    /// requests for bulk answers are refused (`refusesWhileBacklogged`) until it reads.
    /// `queued`: bytes waiting on this member's link to a member (what a relay may forward to it).
    public mutating func receiveLink(_ message: LinkMessage, from peer: MemberID, addr: String, now: Double, backlogged: Bool = false,
                                     queued: (MemberID) -> Int = { _ in 0 }) -> [SessionEffect] {
        if epochs.isRemoved { return [] }
        swim.heard(from: peer, now: now)
        routes.heard(peer, now: now)
        if backlogged && Self.refusesWhileBacklogged(message) { return refuse(.outboxFull) }
        let congested = broadcast.isCongested
        let counted = broadcast.refusals
        let out: [SessionEffect]
        switch message {
        case let .hello(since, count): out = linkHello(from: peer, since: since, nonApplication: count, now: now)
        case let .pushPull(state): out = linkPushPull(state, from: peer, addr: addr, now: now)
        case let .pushPullReply(state):
            // The catch-up (in parts, before the reply) is over with the reply's last part.
            if !state.more { catchUpFrom.remove(peer) }
            out = receivePushPull(state, from: addr, now: now)
        case let .swim(message): out = message.sender == peer ? receive(message, from: addr, now: now) : []
        case let .message(signed): out = receiveSigned(signed, from: peer, now: now)
        case let .batch(batch): out = receiveBatch(batch, from: peer, now: now)
        case let .digest(digest, stamp): out = receiveDigest(digest, activity: stamp, from: peer, now: now)
        case let .request(origin, from, to): out = answerRepair(origin: origin, from: from, to: to, peer: peer)
        case let .baseline(clock, counts):
            guard catchUpFrom.contains(peer), broadcast.awaitingBaseline else { out = refuse(.unsolicitedCatchUp); break }
            out = adoptBaseline(clock, nonApplication: counts, now: now)
        case let .activity(record): out = receiveActivity(record, now: now)
        case let .journal(entries):
            guard catchUpFrom.contains(peer) else { out = refuse(.unsolicitedCatchUp); break }
            out = entries.flatMap { applyJournalEntry($0, announcedBy: nil, now: now) }
        case let .have(id, have, offer):
            journal.receiveHave(peer, id: id, have: have, offer: offer, now: now)
            out = []
        case let .chunkRequest(id, index):
            let serve = journal.admitServe(id, Int(index), to: peer)
            out = serve.effects.map(SessionEffect.journal) + (serve.admitted ? [.serveChunk(to: peer, id: id, index: Int(index))] : [])
        case let .chunkCorrupt(id, index): out = journal.holds(id, Int(index)) ? [.recheckChunk(id: id, index: Int(index), reportedBy: peer)] : []
        case .chunkHeader: out = []  // consumed by the shell's link reader
        case let .epochChanges(changes): out = receiveEpochChanges(changes, from: peer, now: now)
        case let .epochGrant(grant): out = epochOutcome(epochs.receive(grant, now: now), from: peer, now: now)
        case let .epochHead(_, head, holdsKey): out = receiveEpochHead(head, holdsKey: holdsKey, from: peer, now: now)
        case let .timeRequest(wall): out = answerTimeRequest(wall, from: peer, now: now)
        case let .timeReply(echo, wall): out = receiveTimeReply(echo: echo, wallMicros: wall, from: peer, now: now)
        case let .participants(record): out = receiveParticipants(record, from: peer)
        case let .observed(link, datagram): out = receiveObserved(link: link, datagram: datagram, from: peer, now: now)
        case .circuitRequest, .circuitOffer, .circuitAccept, .circuitRefuse, .circuitData, .circuitClose:
            out = receiveCircuit(message, from: peer, queued: queued, now: now)
        case let .punch(attempt, step, addrs): out = receivePunch(step, attempt: attempt, addrs: addrs, from: peer, now: now)
        case let .directedAck(through):
            broadcast.directedAcknowledged(by: peer, through: through)
            out = []
        case let .unreliable(m): out = receiveUnreliable(m, from: peer)
        }
        return out + progressDigests(now: now) + congestionCleared(since: congested) + firstRefusals(since: counted)
    }

    /// Counts a refused input; the first of its reason becomes a `.refused` effect (logged once).
    mutating func refuse(_ reason: Refusal, _ n: Int = 1) -> [SessionEffect] {
        ownRefusals.add(reason, n) ? [.refused(reason)] : []
    }

    /// Applies a journal entry from a delivered broadcast of `origin`, or (nil) from a joiner
    /// catch-up. An add must name the uploader's pinned node key (an uploader long gone is checked
    /// by the manifest's own signature alone), and by broadcast only its uploader announces it:
    /// the broadcast's signature is then the uploader's pinned key. A remove counts only from the
    /// attachment's uploader or an admin (`removeAllowed`).
    mutating func applyJournalEntry(_ entry: JournalEntry, announcedBy origin: MemberID?, now: Double) -> [SessionEffect] {
        switch entry {
        case let .add(manifest, _):
            let pinned = swim.members[manifest.uploader].map { $0.node == manifest.uploaderNodeKey } ?? true
            guard pinned, origin.map({ $0 == manifest.uploader }) ?? true else {
                return refuse(.journalNotByUploader)
            }
        case let .remove(id):
            guard let allowed = removeAllowed(id, announcedBy: origin) else { return [] }
            guard allowed else { return refuse(.journalRemoveNotAllowed) }
        }
        return journal.apply(entry, now: now).map(SessionEffect.journal)
    }
}
