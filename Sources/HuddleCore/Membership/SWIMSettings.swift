/// Tuning of the SWIM + Lifeguard membership instance; every value is in seconds unless noted.
///
/// The defaults target a LAN session of up to a few dozen members (and stay stable to thousands in
/// the simulator): a crashed member is seen as `failed` by every other member in about 2–3 s at
/// N = 24, while a member that is merely slow (CPU load, a pause shorter than the suspicion timeout)
/// refutes in time and is never declared failed. They are twice as fast as memberlist's
/// `DefaultLANConfig` (probe 1 s / 500 ms, suspicion multiplier 4, max multiplier 6), which is what
/// Serf's 6–8 s detection comes from; the Lifeguard extensions (local health, growing suspicion
/// timeouts, buddy system) are what lets us be faster without more false positives
/// (Lifeguard, arXiv 1707.00788, §IV and §V).
public struct SWIMSettings: Sendable, Equatable {
    /// One protocol period: one member is probed per period (SWIM §3). Scaled by the local health
    /// multiplier. 0.5 s keeps one ping + ack per member per half second: ~300 B/s per member.
    public var probeInterval: Double = 0.5
    /// How long a direct ping waits for its ack before indirect probes go out. Scaled by local health.
    /// A LAN round trip is well under 1 ms; 0.2 s leaves room for a loaded scheduler, and leaves
    /// the remaining 0.3 s of the period for the indirect round.
    public var probeTimeout: Double = 0.2
    /// k: how many helpers are asked to ping a member that missed its direct ack (SWIM §3.1).
    public var indirectChecks: Int = 3
    /// Fraction of `probeTimeout` a helper waits for the target before sending a nack (Lifeguard §IV.A).
    public var nackFraction: Double = 0.8
    /// α: the minimum suspicion timeout is α × max(1, log10(N)) × probeInterval (memberlist's
    /// `suspicionTimeout`). 2 gives 1.4 s at N = 24: enough for a refutation to come back from a
    /// member that was starved of CPU for about a second.
    public var suspicionAlpha: Double = 2
    /// Floor of the minimum suspicion timeout, whatever N. A member stopped for a moment (SIGSTOP,
    /// a VM pause, a long GC-like stall) refutes as soon as it runs again, so this is the pause it
    /// survives: a 2 s stop raises suspicion at the earliest ~0.5 s in and is refuted at 2 s, well
    /// before 0.5 + 2.5 s. A crashed process costs only this floor: its links close, every member
    /// suspects it at once (`SWIMInstance.linkLost`) and it is failed ~2.5 s after it died. A host
    /// that vanishes without closing its connections is found by probes: about 3.5–4 s.
    public var minSuspicionTimeout: Double = 2.5
    /// β: the suspicion timeout starts at β × minimum and shrinks towards the minimum as independent
    /// confirmations arrive (Lifeguard §IV.B). A lone suspecter (maybe the slow one) waits β times longer.
    public var suspicionBeta: Double = 3
    /// K: independent confirmations after which the suspicion timeout reaches its minimum.
    /// Clamped to 0 when fewer than K + 2 members exist (nobody could confirm), as memberlist does.
    public var suspicionConfirmations: Int = 3
    /// Another member's claims (`suspect` or `failed`) start at most this many suspicions here per
    /// `claimWindow`, and at most one per subject within the suspicion's maximum timeout, whoever
    /// claims it (`SWIMClaimLimits`); beyond that they are refused (`Refusal.claimRate`). An honest member
    /// starts suspicions by its own probes (one member per probe period: at most 20 per 10 s, and
    /// in practice only the few that crashed) or when links close at once (a host with several
    /// members going down); 16 leaves room for that, while a hostile member can make a member
    /// refute at most once per maximum timeout (with any number of puppets) and start at most 1.6
    /// suspicions a second per member it runs. Its
    /// confirmations of suspicions already running are not limited (each claimer counts once per
    /// suspicion), nor are this member's own suspicions.
    public var claimSuspicionsPerWindow: Int = 16
    /// The window of `claimSuspicionsPerWindow`.
    public var claimWindow: Double = 10
    /// Local health multiplier ceiling: timeouts and the probe interval grow by at most this factor
    /// (memberlist `AwarenessMaxMultiplier`, Lifeguard §IV.A).
    public var maxLocalHealth: Int = 8
    /// λ: each update is piggybacked λ × ceil(log10(N + 1)) times (memberlist `RetransmitMult`).
    /// The chance that one member misses an update falls exponentially with λ; memberlist's 4 left
    /// about one member in a thousand without a refutation at 5 % loss in the simulator, 6 makes
    /// it rare, and stale-claim corrections (see `SWIMInstance.receive`) catch the rest.
    public var retransmitMult: Int = 6
    /// How often pending updates are gossiped on their own datagrams (besides piggybacking on probes).
    public var gossipInterval: Double = 0.1
    /// How many random members each gossip round goes to.
    public var gossipFanout: Int = 3
    /// Recently failed members keep receiving gossip this long, so a falsely failed member learns
    /// it and refutes (memberlist `GossipToTheDeadTime`).
    public var gossipToTheDead: Double = 5
    /// Full-state push-pull with one random member, scaled up beyond 32 members as memberlist's
    /// `pushPullScale` does (so per-member push-pull load stays flat as N grows).
    public var pushPullInterval: Double = 15
    /// How often `join` seeds are tried again while no seed has answered.
    public var joinRetryInterval: Double = 1
    /// Re-merge: each member pushes-pulls with one random failed member every
    /// `remergeIntervalMin...remergeIntervalMax` (uniformly jittered), so both halves of a healed
    /// partition become one session again without a new `join` (what Serf's reconnect does).
    public var remergeIntervalMin: Double = 10
    public var remergeIntervalMax: Double = 20
    /// Failed members are retried for re-merge this long after they failed (6 hours).
    public var remergeWindow: Double = 6 * 3600
    /// Failed entries are forgotten this long after they failed (after the re-merge window ends).
    public var reapFailedAfter: Double = 6 * 3600 + 60
    /// Left entries are forgotten after this long (24 hours), late enough that no old gossip about
    /// the member can still be in flight to resurrect it.
    public var reapLeftAfter: Double = 24 * 3600
    /// Largest encoded `SWIMMessage`, gossip included. The sealed datagram adds 41 bytes of AEAD
    /// framing and 18 of payload header, so 1,100 keeps every datagram ≤ 1,200 bytes (no IP fragments).
    public var maxMessageBytes: Int = 1_100
    /// Most members the table holds, self and failed or left ones included. A new member beyond it
    /// takes the place of the member that has been down (failed or left) the longest, else it is
    /// refused (`Refusal.memberTableFull`): a hostile member cannot gossip fake members in without
    /// end. Far above a full mesh of links (a few dozen members); the simulator raises it for its
    /// thousands.
    public var memberLimit: Int = Self.defaultMemberLimit
    public static let defaultMemberLimit = 1024

    public init() {}

    /// The defaults.
    public static let lan = SWIMSettings()
}
