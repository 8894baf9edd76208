/// What happened to a member, as the control protocol's `member` events name it.
public enum MemberChange: String, Sendable {
    case joined, suspect, alive, failed, left, updated
}
