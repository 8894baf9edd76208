/// The byte budget of one link's queue, the I/O buffer each shell owns for each peer, and when a
/// link is closed for it. One rule for both shells: the shared shell runs it
/// (`SessionShell.receiveLink`, `SessionShell.closeStalledLinks`).
///
/// What a peer can make this member queue for it is bounded: its requests for bulk answers
/// (chunks, repairs, push-pull state: `SessionCore.refusesWhileBacklogged`) are refused while
/// `backlogBytes` or more wait for it (`Refusal.outboxFull`; an honest peer asks again), so at most
/// about `backlogBytes` + one repair answer (`SessionCore.repairAnswerBytes`) + the chunk reads in
/// flight (`Journal.servesPerPeer`) wait at once. Everything else this member sends — its own
/// messages, digests, haves — is always queued: a budget never drops a reliable message. A link
/// whose writer takes nothing for `stallSeconds` while bytes wait (a peer that does not read), or
/// whose backlog stays at `backlogBytes` or more for that time whatever it takes (a peer that reads
/// a little now and then: 1 MiB every 59 s used to keep a link open for ever), is closed
/// (`Refusal.stalledLink`); so is one whose queue passes `hardLimitBytes` (`Refusal.linkOverflow`).
/// Broadcasts queued on it are repaired once a link is back.
public struct LinkBudget: Sendable, Equatable {
    /// Bytes queued for a peer at which its requests for bulk answers are refused. Far above what
    /// an honest fetcher keeps in flight (3 chunks per attachment, 768 KiB).
    public var backlogBytes = 4 << 20
    /// How long bytes may wait untaken (or the backlog stay) before the link is closed
    /// (`--link-stall-seconds`). Longer than any pause a live member survives (a paused member is
    /// failed, and its link closed, in seconds), so only a peer that keeps its link open without
    /// reading meets it.
    public var stallSeconds = 60.0
    /// Bytes queued for one peer at which its link is closed at once. What an honest peer can
    /// make wait is bounded well below it: requests for bulk answers stop at `backlogBytes`, and
    /// this member's own broadcasts by the store limit (8 MiB of unacknowledged messages).
    public var hardLimitBytes = 64 << 20
    /// How often the shared shell holds the links against the budget (at the first tick this long
    /// after the last check). Nothing waits on it: the backlog refusals bound what a peer can make
    /// queue, a stall takes `stallSeconds`, and checking every queue on every tick (20 a second)
    /// cost the simulator at N = 100 a sixth of its time.
    public var checkInterval = 0.25

    public init() {}

    /// What the budget says of a link: kept, or closed for one of two reasons.
    public enum Verdict: Sendable, Equatable {
        case keep
        /// More than `hardLimitBytes` queued (`Refusal.linkOverflow`).
        case overflow
        /// Bytes waited untaken, or the backlog stayed, for `stallSeconds` (`Refusal.stalledLink`).
        case stalled

        /// The refusal a closed link is counted under.
        public var refusal: Refusal? {
            switch self {
            case .keep: nil
            case .overflow: .linkOverflow
            case .stalled: .stalledLink
            }
        }
    }

    /// Whether a queue of `queuedBytes` makes the peer's requests for bulk answers refused.
    public func isBacklogged(queuedBytes: Int) -> Bool { queuedBytes >= backlogBytes }

    /// The verdict on a link with `queuedBytes` queued whose bytes have waited `waited` seconds
    /// untaken, or with `backlogBytes` or more still queued (nil: nothing waits).
    public func verdict(queuedBytes: Int, waited: Double?) -> Verdict {
        if queuedBytes > hardLimitBytes { return .overflow }
        if let waited, waited >= stallSeconds { return .stalled }
        return .keep
    }
}
