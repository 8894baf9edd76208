/// Per linked peer, what time exchanges over its link measured (`LinkMessage.timeRequest`, answered
/// by `.timeReply`): the link's **round-trip time**, smoothed as TCP smooths it (SRTT, RFC 6298),
/// and the peer's **clock skew**, how far its wall clock is from this member's (NTP's offset, RFC
/// 5905). Pure: times come in as arguments (`now`, this member's monotonic seconds; wall clocks in
/// microseconds since 1970).
///
/// Guarantees:
/// - one exchange at a time per peer, asked `interval` after the last one (a new link's peer at the
///   first call after it is up; `force` asks every peer with none pending);
///   a reply is taken only when it echoes the wall time of the request pending to that peer, and
///   not after `timeout`; the round trip is measured by this member's own monotonic clock, so a peer
///   can make its reply late, never early;
/// - the skew is the offset of the exchange of least round trip among the last `window` ones
///   (NTP's clock filter): its error is at most half that round trip (`Estimate.skewError`), and a
///   reply delayed by queueing on the link does not move it;
/// - bounded: entries only for peers asked over a link (the shell's links are bounded by the member
///   table and `SessionCore.strangerLinkLimit`), `window` samples each; `forget` drops one;
/// - no input traps: a peer's wall time is clamped to `maximumWallMicros` when decoded and every
///   computation here is in `Double` on values within 2^53.
public struct LinkTiming: Sendable {
    /// What the exchanges with one peer measured.
    public struct Estimate: Sendable, Equatable {
        /// Smoothed round-trip time of the link, in seconds.
        public internal(set) var roundTrip: Double
        /// Seconds the peer's wall clock is ahead of this member's (negative: behind).
        public internal(set) var skew: Double
        /// At most how far `skew` is from the truth: half the round trip of the exchange it came from.
        public internal(set) var skewError: Double
        /// Exchanges completed, and when (this member's `now`) the last one was.
        public internal(set) var samples: Int
        public internal(set) var measuredAt: Double
        /// The last `window` exchanges, oldest first.
        var recent: [Sample]
    }

    /// One exchange: the peer's offset it gave, and its round trip (seconds).
    struct Sample: Sendable, Equatable {
        let offset: Double
        let roundTrip: Double
    }

    /// A request sent and not yet answered.
    struct Pending: Sendable {
        /// The wall time the request carried (the reply echoes it).
        let wallMicros: UInt64
        let sentAt: Double
    }

    /// Seconds between two exchanges with a peer: a few bytes each way, so cheap at any member count,
    /// and often enough that a doctor run finds an estimate younger than a probe period or two.
    public static let interval = 10.0
    /// A reply later than this is not taken (the peer is asked again at the next interval).
    public static let timeout = 5.0
    /// Exchanges kept per peer for the skew filter (NTP keeps 8).
    public static let window = 8
    /// Weight of a new round trip in the smoothed one (RFC 6298's alpha).
    public static let smoothing = 0.125
    /// Largest wall time taken from a peer: 2^53 µs after 1970 (the year 2255), exact in a `Double`.
    public static let maximumWallMicros: UInt64 = 1 << 53

    public private(set) var estimates: [MemberID: Estimate] = [:]
    private(set) var pending: [MemberID: Pending] = [:]
    /// When each peer is next due an exchange.
    private var dueAt: [MemberID: Double] = [:]

    public init() {}

    /// This member's wall clock at `now`, in microseconds since 1970, within `0...maximumWallMicros`.
    public static func wallMicros(_ seconds: Double) -> UInt64 {
        let micros = (seconds * 1_000_000).rounded()
        guard micros.isFinite, micros > 0 else { return 0 }
        return micros >= Double(maximumWallMicros) ? maximumWallMicros : UInt64(micros)
    }

    /// Requests to send at `now` (this member's wall clock `wall`, seconds): to each of `linked` that
    /// is due (`force`: to each with none pending, as `huddle doctor` asks). Expired requests are
    /// dropped first.
    public mutating func requests(to linked: [MemberID], wall: Double, now: Double, force: Bool = false) -> [(MemberID, LinkMessage)] {
        for (peer, p) in pending where now >= p.sentAt + Self.timeout { pending[peer] = nil }
        let micros = Self.wallMicros(wall)
        var out: [(MemberID, LinkMessage)] = []
        for peer in linked where pending[peer] == nil && (force || now >= dueAt[peer] ?? -.infinity) {
            pending[peer] = Pending(wallMicros: micros, sentAt: now)
            dueAt[peer] = now + Self.interval
            out.append((peer, .timeRequest(wallMicros: micros)))
        }
        return out
    }

    /// Whether a request to `peer` waits for its reply.
    public func isPending(_ peer: MemberID) -> Bool { pending[peer] != nil }

    /// A reply from `peer`: `echo` is the wall time of the request, `peerMicros` the peer's wall
    /// clock when it answered; `wall` this member's wall clock now (seconds). False when no request
    /// with that wall time is pending to `peer` (late, or never asked): nothing changes.
    @discardableResult
    public mutating func reply(from peer: MemberID, echo: UInt64, peerMicros: UInt64, wall: Double, now: Double) -> Bool {
        guard let p = pending[peer], p.wallMicros == echo, now < p.sentAt + Self.timeout else { return false }
        pending[peer] = nil
        let roundTrip = max(0, now - p.sentAt)
        let sample = Sample(offset: Self.offset(sent: Double(p.wallMicros) / 1e6, answered: Double(min(peerMicros, Self.maximumWallMicros)) / 1e6,
                                                received: Double(Self.wallMicros(wall)) / 1e6), roundTrip: roundTrip)
        var e = estimates[peer] ?? Estimate(roundTrip: roundTrip, skew: 0, skewError: 0, samples: 0, measuredAt: now, recent: [])
        if e.samples > 0 { e.roundTrip += Self.smoothing * (roundTrip - e.roundTrip) }
        e.samples += 1
        e.measuredAt = now
        e.recent.append(sample)
        if e.recent.count > Self.window { e.recent.removeFirst(e.recent.count - Self.window) }
        let best = e.recent.min { $0.roundTrip < $1.roundTrip } ?? sample
        e.skew = best.offset
        e.skewError = best.roundTrip / 2
        estimates[peer] = e
        return true
    }

    /// NTP's offset of the answerer's clock from the asker's, for an answer stamped once (received
    /// and sent at the same instant): ((t2 − t1) + (t3 − t4)) / 2 with t2 = t3. Seconds; positive
    /// when the answerer is ahead. Exact within the round trip's asymmetry.
    public static func offset(sent t1: Double, answered t2: Double, received t4: Double) -> Double {
        ((t2 - t1) + (t2 - t4)) / 2
    }

    /// The link to `peer` closed: its pending request is dropped (a reply cannot come any more).
    /// Its estimate is kept when `keep` (it is still a member), else dropped.
    public mutating func linkDown(_ peer: MemberID, keep: Bool) {
        pending[peer] = nil
        dueAt[peer] = nil
        if !keep { estimates[peer] = nil }
    }

    /// `peer` failed, left or was removed: everything about it goes.
    public mutating func forget(_ peer: MemberID) { linkDown(peer, keep: false) }
}
