/// What happened to a member, as the control protocol's `member` events name it.
public enum MemberChange: String, Sendable, CaseIterable {
    case joined, suspect, alive, failed, left, updated
    /// Its node key was removed from the session by an epoch change (`remove`, issue 21).
    case removed
    /// How this member reaches it changed (`SessionCore.Path`, issue 36).
    case path
}
