/// Why something a peer sent was refused. Every refusal is counted (`stats` shows the counts under
/// `refused`, keyed by `rawValue`) and the first of each reason is logged, so an attack is visible
/// without flooding the log.
public enum Refusal: String, CaseIterable, Sendable, Comparable {
    /// A membership record that would give a member id another node key.
    case keyChange = "key_change"
    /// A link whose handshake proved another node key than the one its member id is pinned to.
    case linkForPinnedMember = "link_for_pinned_member"
    /// A baseline or journal catch-up from a peer this member did not ask (or no longer waits for).
    case unsolicitedCatchUp = "unsolicited_catch_up"
    /// A journal entry announced by another member than the attachment's uploader.
    case journalNotByUploader = "journal_not_by_uploader"
    /// A datagram whose counter was already seen, or fell out of its sender's replay window.
    case replayedDatagram = "replayed_datagram"
    /// A datagram whose counter was more than `ReplayWindow.maximumJump` ahead of its sender's highest.
    case counterJump = "counter_jump"
    /// A datagram under the session key that the session-key form may not carry (anything but a
    /// bare ping or the ack to this member's probe), or from a member this member holds a link's
    /// datagram keys with (`SessionCore.receiveDatagram`).
    case unauthenticatedDatagram = "unauthenticated_datagram"

    public static func < (a: Refusal, b: Refusal) -> Bool { a.rawValue < b.rawValue }
}

/// How many of each `Refusal` happened. Counts saturate at `Int.max` (they never trap).
public struct RefusalCounts: Sendable, Equatable {
    private var counts: [Refusal: Int] = [:]

    public init() {}

    public subscript(_ reason: Refusal) -> Int { counts[reason, default: 0] }

    /// Counts `n` refusals for `reason`; true when they are the first of that reason (log them).
    @discardableResult
    public mutating func add(_ reason: Refusal, _ n: Int = 1) -> Bool {
        let old = counts[reason, default: 0]
        let (sum, overflow) = old.addingReportingOverflow(max(0, n))
        counts[reason] = overflow ? .max : sum
        return old == 0 && n > 0
    }

    /// Every reason's count, this one's and `other`'s added.
    public func adding(_ other: RefusalCounts) -> RefusalCounts {
        var all = self
        for (reason, n) in other.counts { all.add(reason, n) }
        return all
    }

    /// All refusals of all reasons.
    public var total: Int { counts.values.reduce(0) { $0.addingReportingOverflow($1).overflow ? .max : $0 + $1 } }
}
