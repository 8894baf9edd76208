/// What this member's probing came to since it started (SWIM §3): what `huddle run --metrics`
/// reports as probes sent and failed, and the round trip of each ack.
public struct SWIMProbeCounts: Sendable, Equatable {
    /// Probes started (one direct ping each; the ping-reqs of an indirect probe are not counted).
    public internal(set) var sent = 0
    /// Probes answered by an ack, directly or through a helper, within their protocol period.
    public internal(set) var acked = 0
    /// Probes with no ack by the end of their period, or whose answer was due while this member
    /// was not running (Lifeguard §IV.A).
    public internal(set) var failed = 0
    /// Seconds from the ping to its ack, of the probe acked last (`acked` tells a new one).
    public internal(set) var lastRoundTrip = 0.0

    public init() {}
}
