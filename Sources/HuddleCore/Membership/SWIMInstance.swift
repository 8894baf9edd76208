#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The SWIM membership protocol with the Lifeguard extensions, as a pure value
/// (SWIM, Das et al. 2002; Lifeguard, arXiv 1707.00788; behaviour modelled on hashicorp/memberlist).
///
/// Events go in (`join`, `tick`, `receive`, `receivePushPull`, `leave`, `update`) with the current
/// time `now` in seconds; `SWIMEffect`s come out. It reads no clock and no socket, and its only
/// randomness is a `SWIMRandom` seeded at `init`, so a run is reproducible from its inputs.
///
/// Guarantees:
/// - one member is probed per protocol period, in a randomized round-robin order (every live member
///   once per round); a missed ack leads to `indirectChecks` indirect probes, then to suspicion;
/// - a suspected member is declared `failed` only after a suspicion timeout that starts at
///   β × min and shrinks with independent confirmations to min (Lifeguard §IV.B); a member that hears
///   itself suspected (or declared failed) raises its incarnation and gossips `alive`, which wins;
///   a probe of a suspect carries the suspicion, so the suspect can refute at once (buddy system, §IV.C);
/// - the local health multiplier stretches probe interval and timeouts while this member seems slow
///   (missed nacks, failed probes, being suspected) and relaxes after good probes (§IV.A);
/// - every update is piggybacked at most `retransmitMult × ceil(log10(N + 1))` times;
/// - `leave` gossips `left` with a higher incarnation: others report `left`, never `failed`;
/// - `left` is final (a member id is one run of a node), `failed` is not: a failed member heard alive
///   at a higher incarnation (it refuted) becomes alive again, and the addresses of failed members are
///   retried with push-pull for `remergeWindow`, so a healed partition becomes one view again;
/// - a member's node key is pinned when the member is first known: a record naming another node key
///   for the same member id is refused (`refusals[.keyChange]`), so nobody can take over a member by
///   gossiping its id with a higher incarnation;
/// - only a member speaks for itself: its `alive` records and its `left` count only with its own
///   signature under its pinned key, and `suspect`/`failed` only as claims signed by a known
///   suspecter about the incarnation the member itself signed (`signer`); a claim changes the
///   member's state, never its record. Nobody but a member raises its incarnation, so a claim about
///   this member above its own incarnation is refused rather than refuted (`refusals`);
/// - authority per member: only this member's own suspicion timeout fails a member here; another
///   member's `failed` claim only starts a suspicion the member can refute (or confirms a running
///   one), claims about others count only from a live claimer, claims start at most one suspicion per
///   subject per maximum suspicion timeout whoever the claimers are, and each claimer at most
///   `claimSuspicionsPerWindow` per `claimWindow` (`applyClaim`, `SWIMClaimLimits`);
/// - `joined` is emitted once per member, when it is first known; then `suspect`, `alive` (refuted
///   after suspect or failed), `failed`, `left` and `updated` (name or address changed) as they happen.
public struct SWIMInstance: Sendable {
    public let settings: SWIMSettings
    /// Signs this member's records and claims, and checks everyone else's.
    let signer: any MembershipSigner
    /// This member's own record (its incarnation grows with every refutation, update and leave).
    public internal(set) var local: MemberInfo
    /// The full view: every member known, self included, with state and incarnation.
    public internal(set) var members: [MemberID: MemberInfo] { didSet { membersVersion &+= 1 } }
    /// Changes with every change to `members` (what caches of the view are keyed by).
    public private(set) var membersVersion: UInt64 = 0
    /// Lifeguard's local health multiplier.
    public internal(set) var awareness: SWIMAwareness
    /// Running suspicion timers, by suspected member.
    public internal(set) var suspicions: [MemberID: SWIMSuspicion] = [:]
    /// Probes sent, acked and failed, and the last ack's round trip (for metrics).
    public internal(set) var probeCounts = SWIMProbeCounts()

    /// When each failed or left member stopped being live.
    var downSince: [MemberID: Double] = [:]
    var broadcasts = SWIMBroadcastQueue()
    var rng: SWIMRandom
    /// Every known member but self, in probe order; shuffled at the end of every round.
    var probeOrder: [MemberID] = []
    var probeIndex = 0
    /// Members to probe before the round-robin order goes on: those that came back from failed
    /// on a record this member did not hear from them itself (`applyAlive`), so a crashed
    /// member revived by a stale refutation is checked within a probe or two, not a round later.
    /// At most `probeNextLimit`.
    var probeNext: [MemberID] = []
    static let probeNextLimit = 8
    var probe: Probe?
    /// Indirect probes this member runs for others, by the seq of its own ping to the target.
    var relays: [UInt32: Relay] = [:]
    /// Ping-reqs relayed at once (each waits at most a probe timeout): more are refused
    /// (`pingReqOverflow`). Honest probers ask a handful of helpers per failed probe.
    static let maximumRelays = 256
    var seq: UInt32 = 0
    /// Alive and suspect members, self included while it has not left.
    public internal(set) var liveCount = 1
    /// Suspicions other members' claims started here lately, per claimer (their rate limit).
    var claimLimits = SWIMClaimLimits()
    /// When each member was last told of a claim that it failed (`receivePushPull`).
    var claimToldAt: [MemberID: Double] = [:]
    /// When this member last heard from each member directly, over its authenticated link
    /// (`heard(from:now:)`): direct evidence that a suspicion others started is wrong.
    var heardFrom: [MemberID: Double] = [:]
    /// Records refused, by reason (a record naming another node key for a known member, …).
    public internal(set) var refusals = RefusalCounts()
    /// Records refused because they named another node key for a known member.
    public var refusedKeyChanges: Int { refusals[.keyChange] }

    var started = false
    var nextProbeAt = 0.0
    var nextGossipAt = 0.0
    var nextPushPullAt = 0.0
    var nextRemergeAt = 0.0
    var nextReapAt = 0.0
    var seeds: [String] = []
    var nextJoinRetryAt = 0.0
    var joinBackoff = 0.0

    /// A probe of one member in flight.
    struct Probe: Sendable {
        var target: MemberID
        var seq: UInt32
        /// When the direct ping times out and indirect pings go out.
        var timeoutAt: Double
        /// End of the protocol period: no ack by then means suspicion.
        var deadline: Double
        var indirectSent = false
        var expectedNacks = 0
        var nacks = 0
        /// When the direct ping went out (its ack's round trip is measured from here).
        var sentAt = 0.0
    }

    /// A ping this member sends on behalf of `requester` (indirect probe).
    struct Relay: Sendable {
        var requester: String
        /// The member pinged: only its ack completes the relay.
        var target: MemberID
        var seq: UInt32
        var nackAt: Double
    }

    public init(local: MemberInfo, settings: SWIMSettings = .lan, seed: UInt64, signer: any MembershipSigner) {
        var me = local
        me.state = .alive
        me.claim = nil
        me.proof = signer.sign(MembershipStatement.alive(me))
        self.local = me
        self.settings = settings
        self.signer = signer
        members = [me.id: me]
        awareness = SWIMAwareness(max: settings.maxLocalHealth)
        rng = SWIMRandom(seed: seed)
    }

    /// Starts with a known view (a restored state, or a simulation that begins after everyone
    /// joined): the records are taken as they are, with no events and nothing gossiped about them.
    public init(local: MemberInfo, settings: SWIMSettings = .lan, seed: UInt64, signer: any MembershipSigner, members known: [MemberInfo]) {
        self.init(local: local, settings: settings, seed: seed, signer: signer)
        for info in known where info.id != self.local.id && members[info.id] == nil {
            members[info.id] = info
            probeOrder.append(info.id)
            if Self.isLive(info.state) { liveCount += 1 } else { downSince[info.id] = 0 }
        }
        probeOrder.shuffle(using: &rng)
    }

    // MARK: - Views

    /// True once this member has called `leave`.
    public var hasLeft: Bool { local.state == .left }

    /// How many times each update is piggybacked: λ × ceil(log10(N + 1)) (memberlist `retransmitLimit`).
    public var retransmitLimit: Int {
        settings.retransmitMult * Int(ceil(log10(Double(liveCount + 1))))
    }

    /// Current (min, max) suspicion timeouts for the live member count.
    public var suspicionBounds: (min: Double, max: Double) {
        SWIMSuspicion.bounds(members: liveCount, settings: settings)
    }

    /// Updates waiting to be piggybacked.
    public var pendingBroadcasts: Int { broadcasts.count }

    /// The full state for a push-pull exchange: every member record, self included, in id order.
    public func pushPullState() -> [MemberInfo] { members.values.sorted { $0.id < $1.id } }

    /// The earliest time `tick` has something to do (a shell may also tick on a fixed timer).
    public var nextDeadline: Double {
        guard started else { return 0 }
        var t = nextPushPullAt
        if local.state == .left { return broadcasts.isEmpty ? .infinity : nextGossipAt }
        t = min(t, nextProbeAt, nextReapAt)
        if let p = probe { t = min(t, p.indirectSent ? p.deadline : p.timeoutAt) }
        if !broadcasts.isEmpty { t = min(t, nextGossipAt) }
        if !downSince.isEmpty { t = min(t, nextRemergeAt) }
        if !seeds.isEmpty { t = min(t, nextJoinRetryAt) }
        for r in relays.values { t = min(t, r.nackAt) }
        for s in suspicions.values { t = min(t, s.deadline) }
        return t
    }

    // MARK: - Commands

    /// Contacts `seeds` (addresses) with a push-pull join; retried with backoff until one answers.
    public mutating func join(seeds: [String], now: Double) -> [SWIMEffect] {
        start(now)
        let targets = seeds.filter { $0 != local.addr }
        self.seeds = targets
        joinBackoff = settings.joinRetryInterval
        nextJoinRetryAt = now + joinBackoff
        return targets.map { .pushPull(to: $0, member: nil, join: true) }
    }

    /// Leaves gracefully: gossips `left` at a higher incarnation to a few members at once and keeps
    /// gossiping it on `tick` (the shell should keep ticking for a few gossip intervals before it exits).
    public mutating func leave(now: Double) -> [SWIMEffect] {
        start(now)
        guard local.state != .left else { return [] }
        local.incarnation += 1
        local.state = .left
        local.proof = signer.sign(MembershipStatement.left(local.id, incarnation: local.incarnation))
        members[local.id] = local
        liveCount -= 1
        probe = nil
        relays = [:]
        seeds = []
        broadcasts.enqueue(.left(local.id, incarnation: local.incarnation, signature: local.proof))
        var effects: [SWIMEffect] = []
        for target in randomMembers(2 * settings.gossipFanout, excluding: nil, recentlyFailed: false, now: now) {
            let gossip = broadcasts.take(budget: settings.maxMessageBytes - 11, limit: retransmitLimit)
            if gossip.isEmpty { break }
            effects.append(.send(SWIMMessage(sender: local.id, kind: .gossip, gossip: gossip), to: target.addr))
        }
        nextGossipAt = now + settings.gossipInterval
        return effects
    }

    /// Changes this member's name, address and/or reach addresses; others report `updated`.
    public mutating func update(name: String? = nil, addr: String? = nil, reach: [String]? = nil, now: Double) -> [SWIMEffect] {
        start(now)
        guard local.state != .left else { return [] }
        if let name { local.name = name }
        if let addr { local.addr = addr }
        if let reach { local.reach = Array(reach.prefix(MemberInfo.maximumReach)) }
        local.incarnation += 1
        signLocal()
        broadcasts.enqueue(.alive(local))
        return []
    }

    // MARK: - Helpers shared by the extensions

    /// Signs this member's record at its current incarnation and stores it in the view.
    mutating func signLocal() {
        local.proof = signer.sign(MembershipStatement.alive(local))
        members[local.id] = local
    }

    /// A claim by this member that `member` is suspect (or failed) at `incarnation`, signed.
    func ownClaim(failed: Bool, about member: MemberID, incarnation: UInt64) -> SWIMGossip {
        let signature = signer.sign(MembershipStatement.claim(failed: failed, about: member, incarnation: incarnation, by: local.id))
        return failed ? .failed(member, incarnation: incarnation, from: local.id, signature: signature)
                      : .suspect(member, incarnation: incarnation, from: local.id, signature: signature)
    }

    /// Sets the schedule on the first event, staggering periodic work so members do not align.
    mutating func start(_ now: Double) {
        guard !started else { return }
        started = true
        nextProbeAt = now + rng.uniform(0, settings.probeInterval)
        nextGossipAt = now + settings.gossipInterval
        nextPushPullAt = now + rng.uniform(0.5, 1) * settings.pushPullInterval
        nextRemergeAt = now + rng.uniform(settings.remergeIntervalMin, settings.remergeIntervalMax)
        nextReapAt = now + 60
    }

    static func isLive(_ state: MemberState) -> Bool { state == .alive || state == .suspect }

    /// A message to `addr` with `prefix` updates first, then as many pending updates as fit.
    mutating func message(_ kind: SWIMMessage.Kind, to addr: String, prefix: [SWIMGossip] = []) -> SWIMEffect {
        var m = SWIMMessage(sender: local.id, kind: kind, gossip: prefix)
        let budget = settings.maxMessageBytes - m.encodedSize
        if budget >= SWIMGossip.minimumEncodedSize {
            m.gossip += broadcasts.take(budget: budget, limit: retransmitLimit)
        }
        return .send(m, to: addr)
    }

    /// Up to `count` distinct random members other than self and `excluding`: live ones, and with
    /// `recentlyFailed` also members failed less than `gossipToTheDead` ago. O(count) for large views.
    mutating func randomMembers(_ count: Int, excluding: MemberID?, recentlyFailed: Bool, now: Double) -> [MemberInfo] {
        guard count > 0, !probeOrder.isEmpty else { return [] }
        func eligible(_ m: MemberInfo) -> Bool {
            if m.id == excluding { return false }
            if Self.isLive(m.state) { return true }
            guard recentlyFailed, m.state == .failed, let since = downSince[m.id] else { return false }
            return now - since < settings.gossipToTheDead
        }
        if probeOrder.count <= 4 * count + 8 {
            var all = probeOrder.compactMap { members[$0] }.filter(eligible)
            all.shuffle(using: &rng)
            return Array(all.prefix(count))
        }
        var chosen: [MemberInfo] = []
        var attempts = 0
        while chosen.count < count, attempts < 8 * count {
            attempts += 1
            guard let m = members[probeOrder[rng.index(probeOrder.count)]], eligible(m),
                  !chosen.contains(where: { $0.id == m.id }) else { continue }
            chosen.append(m)
        }
        return chosen
    }

    /// Puts `id` among the next members probed (`probeNext`), if there is room and it is not there.
    mutating func probeSoon(_ id: MemberID) {
        guard probeNext.count < Self.probeNextLimit, !probeNext.contains(id) else { return }
        probeNext.append(id)
    }

    /// Adds a newly known member to the probe order at a random position (memberlist does the same),
    /// so a new member is probed within one round, not only after the next shuffle.
    mutating func addToProbeOrder(_ id: MemberID) {
        probeOrder.append(id)
        let j = rng.index(probeOrder.count)
        probeOrder.swapAt(j, probeOrder.count - 1)
    }
}
