/// How many suspicions each claimer has started here lately: the rate limit on other members'
/// `suspect` and `failed` claims (issue 33, item 3).
///
/// Guarantees: `admit` says yes to a new suspicion from a claimer at most once per subject within
/// `subjectGap` seconds (the suspicion's maximum timeout: a member refutes one suspicion before
/// the same claimer may start the next), and at most `perWindow` times within any `window`
/// seconds, whoever the subjects are. What it keeps per claimer is bounded by those two limits
/// (entries older than both are dropped at each call), and a claimer it forgets (`forget`) starts
/// afresh. It reads no clock: `now` comes from the caller.
struct SWIMClaimLimits: Sendable, Equatable {
    private struct Start: Sendable, Equatable {
        var subject: MemberID
        var at: Double
    }

    private var starts: [MemberID: [Start]] = [:]

    /// Whether `claimer` may start a suspicion of `subject` now; when it may, the start is counted.
    mutating func admit(claimer: MemberID, subject: MemberID, now: Double, window: Double, perWindow: Int, subjectGap: Double) -> Bool {
        let keep = max(window, subjectGap)
        var recent = (starts[claimer] ?? []).filter { now - $0.at < keep }
        defer { starts[claimer] = recent.isEmpty ? nil : recent }
        guard !recent.contains(where: { $0.subject == subject && now - $0.at < subjectGap }) else { return false }
        guard recent.filter({ now - $0.at < window }).count < perWindow else { return false }
        recent.append(Start(subject: subject, at: now))
        return true
    }

    /// Forgets `claimer`'s starts (it was forgotten by the membership table).
    mutating func forget(_ claimer: MemberID) { starts[claimer] = nil }
}
