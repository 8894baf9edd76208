/// Where a `GroupSession` is in its life, as SharePlay's `GroupSession.State`.
///
/// Guarantees: a session goes `waiting` → `joined` → `invalidated` and never back; once invalidated,
/// every update sequence of the session and of its messengers and journals has ended.
public enum GroupSessionState: Equatable, Sendable {
    /// Connected to the node, events not yet followed: set up messengers and tasks, then `join()`.
    case waiting
    /// Following the session: participants, activity, messages and attachments arrive.
    case joined
    /// Over: this program left (`.left`), the node restarted (`.nodeRestarted`), or no node
    /// answered within the reconnect timeout (`.noNode`, `.disconnected`).
    case invalidated(reason: HuddleKitError)
}
