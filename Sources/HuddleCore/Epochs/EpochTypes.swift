import HuddleCrypto


/// What receiving an epoch change (or a grant) did.
public enum EpochReceipt: Sendable, Equatable {
    /// Refused, and not kept.
    case refused(Refusal)
    /// Already known (or already waiting).
    case duplicate
    /// Its parent is not known yet: kept aside (at most `EpochSettings.maxWaiting`) until it is.
    case waiting
    /// Kept; the winning history did not move (a losing sibling, or a change this member needs no
    /// key from).
    case recorded
    /// The winning history moved and this member holds the new head's key: switch links,
    /// datagrams and the key file to it.
    case moved(SessionKey)
    /// This member's node key is removed: it is out of the session.
    case removed(by: [UInt8])
    /// The winning history moved to an epoch whose key this member was not handed (and it is not
    /// removed): it asks a member for a grant, by linking with the newest key it holds.
    case notHanded
}

/// Whether a member whose link handshake proved it holds some epoch's key is let in.
public enum EpochAdmission: Sendable, Equatable {
    /// It holds the current key.
    case current
    /// It holds an older key within the grace and was on that epoch's roster (or the next one's)
    /// and never removed: let it in and hand it over (`EpochHistory.handover`).
    case behind
    case refused(Refusal)
}

/// What a member that came back holding an older epoch's key is handed: the epoch changes of the
/// winning history after the epoch it holds, parent first, and a grant of the current key when
/// the current roster does not hand it the key already.
public struct EpochHandover: Sendable, Equatable {
    public var changes: [EpochChange]
    public var grant: EpochGrant?
}

/// The bounds and policy of the epoch rules.
public struct EpochSettings: Sendable {
    /// How long an epoch's key is still accepted after the epoch ended (`--rekey-grace`), and how
    /// long a roster entry nobody has seen is carried into the next epoch: 7 days.
    public var grace: Double = 7 * 24 * 3600
    /// Most epoch changes remembered; the oldest epochs are forgotten first (then the grace is shorter).
    public var maxChanges = 128
    /// Most changes kept waiting for their parent; the oldest is dropped when full.
    public var maxWaiting = 32
    /// Most removed node keys remembered beyond the changes that removed them.
    public var maxRemembered = 4096
    /// Most equivocations whose evidence (the two changes) is kept; the equivocators themselves
    /// are remembered up to `maxRemembered`.
    public var maxEvidence = 16
    /// Most keys a handshake tries (the current one first, then newest to oldest).
    public var maxHandshakeKeys = 32
    /// How long after a removal is found lost (its change lost to a concurrent one) every member on
    /// the roster re-issues it, when the member designated to do so has not.
    public var reissueDelay: Double = 30
    /// Each maker's rate of epoch changes (`EpochHistory+Rate`): `changeBurst` in a row, then one
    /// per `changeInterval` seconds sustained, by the makers' signed times; changes above it are
    /// delayed, not refused. A `changeInterval` of 0 turns the rate off (signed times must still rise).
    public var changeInterval: Double = 2
    public var changeBurst = 3
    /// How far ahead of this member's wall clock a change's release may be and still count at once:
    /// members' clocks differ by about this much anyway (only a delay depends on it, never a decision).
    public var clockTolerance: Double = 1
    public init() {}
}
