/// Where datagrams reach a member whose link comes from behind a NAT or over a relay (issue 36,
/// item 3: punching over UDP), and when to send it a datagram that opens the way.
///
/// Guarantees:
/// - a path is only an address one of the member's own link-keyed datagrams came from (the
///   caller records it after the datagram opened and passed its replay window), and it is in use
///   only while the member's last datagram on it is younger than `fresh`: a path that stops
///   carrying is dropped within `fresh`, and what it carried goes over the link again;
/// - at most one path and one send time per member, dropped with its link (`linkDown`): the table
///   is bounded by the link table;
/// - a member is sent at most one round of opening datagrams per `interval`, to at most
///   `maximumTargets` addresses.
public struct UDPPaths: Sendable, Equatable {
    /// How long a path stays in use after the member's last datagram on it.
    public static let fresh = 6.0
    /// How often a member without a path in use, or with one, is sent an opening (or keepalive) round.
    public static let interval = 2.0
    /// Most addresses one round goes to.
    public static let maximumTargets = 2

    struct Path: Sendable, Equatable {
        var source: String
        var heard: Double
    }

    private var paths: [MemberID: Path] = [:]
    private var sentAt: [MemberID: Double] = [:]
    /// The latest time this table was told of (`heard`, `due`, `advance`).
    private var now = -Double.infinity
    /// When the next sweep of members is due (`sweepDue`).
    private var sweepAt = -Double.infinity

    public init() {}

    /// An authenticated datagram from `member` came from `source`.
    mutating func heard(_ member: MemberID, from source: String, now: Double) {
        self.now = max(self.now, now)
        paths[member] = Path(source: source, heard: now)
    }

    /// The address `member`'s datagrams go to, while its path is fresh.
    public func address(of member: MemberID) -> String? {
        guard let path = paths[member], now - path.heard < Self.fresh else { return nil }
        return path.source
    }

    /// Whether a sweep of members is due at `now` (once per half `interval`); moves the clock.
    mutating func sweepDue(now: Double) -> Bool {
        self.now = max(self.now, now)
        guard now >= sweepAt else { return false }
        sweepAt = now + Self.interval / 2
        return true
    }

    /// Whether `member` is due a round at `now`; if so, it is counted as sent.
    mutating func due(_ member: MemberID, now: Double) -> Bool {
        if let at = sentAt[member], now - at < Self.interval { return false }
        sentAt[member] = now
        return true
    }

    /// `member`'s link closed: its path and send time are forgotten.
    mutating func linkDown(_ member: MemberID) {
        paths[member] = nil
        sentAt[member] = nil
    }
}
