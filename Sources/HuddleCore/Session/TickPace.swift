/// How soon the tick's periodic work is due (`SessionCore.nextDeadline`): the journal's (chunk
/// requests, haves, time requests, directed acks) every `SessionCore.journalInterval` and the
/// digest check every `SessionCore.digestInterval` only while something that work reads changed
/// since it last ran; otherwise the journal's every `SessionCore.idleTickInterval` (its own timers
/// — request timeouts, re-offers, have refreshes — are seconds long) and the digest at its refresh.
/// An idle member then wakes a few times a second instead of twenty.
///
/// Guarantees: a change to the state the periodic work reads (every part of the core whose
/// property bumps `version`), and every link message, make that work due within its interval, as
/// before; what a tick
/// itself changes (its own bookkeeping) does not, unless membership changed in it (SWIM's
/// changes, or members removed by epoch work).
struct TickPace: Sendable, Equatable {
    /// Moves on with every change to the parts of the core the periodic work reads (`didSet`).
    var version: UInt64 = 0
    /// `version` when the journal's work last ran, or a tick that left nothing new for it ended.
    var journalSeen = UInt64.max
    /// The same for the digest check.
    var digestSeen = UInt64.max

    /// An input that counts as a change whatever it changed (a link message).
    mutating func noteInput() { version &+= 1 }

    /// Something the journal's work reads changed since it last ran.
    var journalChanged: Bool { journalSeen != version }
    /// Something the digest reads changed since it was last checked.
    var digestChanged: Bool { digestSeen != version }

    /// A tick ended (`before`: the pace when it began). Work that ran has seen everything; work
    /// that did not run keeps what was new before the tick, and what membership changed in it.
    mutating func ticked(before: TickPace, membershipChanged: Bool, journalRan: Bool, digestRan: Bool) {
        if journalRan || (!before.journalChanged && !membershipChanged) { journalSeen = version }
        if digestRan || (!before.digestChanged && !membershipChanged) { digestSeen = version }
    }
}
