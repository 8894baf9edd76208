/// How many suspicions each claimer has started here lately: the rate limit on other members'
/// `suspect` and `failed` claims (issue 33, item 3).
///
/// Guarantees: `admit` says yes to a new suspicion of a subject at most once within `subjectGap`
/// seconds (the suspicion's maximum timeout: a member refutes one suspicion before anyone may start
/// the next), **whoever the claimers are** — a hostile member's puppets, each a member with its own
/// budget, taking turns used to make the subject refute once per puppet — and to one claimer at
/// most `perWindow` times within any `window` seconds, whoever the subjects are. What it keeps is
/// bounded: per claimer by those two limits (entries older than both are dropped at each call), per
/// subject one time (dropped once past the gap, at the claimer's next call); a member it forgets
/// (`forget`, as claimer and as subject) starts afresh. It reads no clock: `now` comes from the caller.
struct SWIMClaimLimits: Sendable, Equatable {
    private struct Start: Sendable, Equatable {
        var subject: MemberID
        var at: Double
    }

    private var starts: [MemberID: [Start]] = [:]
    /// When a claim last started a suspicion of each subject, whoever claimed it.
    private var lastStart: [MemberID: Double] = [:]

    /// Whether `claimer` may start a suspicion of `subject` now; when it may, the start is counted.
    mutating func admit(claimer: MemberID, subject: MemberID, now: Double, window: Double, perWindow: Int, subjectGap: Double) -> Bool {
        let keep = max(window, subjectGap)
        var recent = (starts[claimer] ?? []).filter { now - $0.at < keep }
        defer { starts[claimer] = recent.isEmpty ? nil : recent }
        for start in recent where lastStart[start.subject].map({ now - $0 >= subjectGap }) == true { lastStart[start.subject] = nil }
        if let last = lastStart[subject], now - last < subjectGap { return false }
        guard recent.filter({ now - $0.at < window }).count < perWindow else { return false }
        recent.append(Start(subject: subject, at: now))
        lastStart[subject] = now
        return true
    }

    /// Forgets `member`'s starts, as claimer and as subject (it was forgotten by the membership table).
    mutating func forget(_ member: MemberID) {
        starts[member] = nil
        lastStart[member] = nil
    }
}
