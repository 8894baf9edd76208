import HuddleControl

/// A program's place in a Huddle session, shaped after SharePlay's `GroupSession`: who takes part,
/// what the group is doing (the typed `activity`), and the ground messengers and journals stand on.
///
/// Connect to the node, set up messengers, journals and the tasks reading them, then `join()`:
/// nothing that happens after `join()` is missed by a sequence made before it.
///
/// Guarantees: `activeParticipants` always contains `localParticipant`; every sequence delivers in
/// the node's event order; a lost control connection is resumed from the last event's cursor
/// (nothing lost, nothing twice); when the node restarts or stays unreachable for
/// `reconnectTimeout`, `state` becomes `.invalidated` with the reason and every sequence ends.
public final class GroupSession<ActivityType: GroupActivity>: Sendable {
    /// SharePlay's name for the session's state.
    public typealias State = GroupSessionState

    let hub: SessionHub

    private init(hub: SessionHub) { self.hub = hub }

    /// Connects to the node whose control socket is at `control` (default: `$HUDDLE_CONTROL`, else
    /// `$XDG_RUNTIME_DIR/huddle.sock`, else `/tmp/huddle-$UID.sock`). The session is `.waiting`
    /// until `join()`.
    ///
    /// - Parameters:
    ///   - replayingHistory: deliver, at `join()`, the messages the node retained from before this
    ///     program connected (a program that restarts, or one that renders what the node saw).
    ///   - reconnectTimeout: how long a lost connection is retried before the session is invalidated.
    public static func connect(control: String? = nil, replayingHistory: Bool = false,
                               reconnectTimeout: Duration = .seconds(30)) async throws(HuddleKitError) -> GroupSession {
        let connection = NodeConnection(path: ControlPath.resolve(control), reconnectTimeout: reconnectTimeout)
        let status = try await connection.open()
        guard let member = status["member"]?.stringValue else { throw .nodeFailed("status has no member") }
        let me = Participant(id: member, node: status["node"]?.stringValue ?? "", name: status["name"]?.stringValue ?? "")
        return GroupSession(hub: SessionHub(connection: connection, localParticipant: me, replayingHistory: replayingHistory))
    }

    /// This program's own participant: the member its node runs as.
    public var localParticipant: Participant { hub.localParticipant }

    /// The participants taking part now (alive or suspected members), this one included; empty
    /// before `join()`.
    public var activeParticipants: Set<Participant> { hub.participants }

    /// `activeParticipants` now (once joined), then each time it changes: what SharePlay's
    /// `$activeParticipants` publishes. New participants are `new.subtracting(old)`.
    public var activeParticipantsUpdates: AsyncStream<Set<Participant>> { hub.participantStream() }

    /// Where the session is in its life.
    public var state: State { hub.state }

    /// `state` now, then each change; ends after `.invalidated`.
    public var stateUpdates: AsyncStream<State> { hub.stateStream() }

    /// What the group is doing, or nil when no activity of this type is set (none yet, or another
    /// kind of app's). Set it with `setActivity(_:)`.
    public var activity: ActivityType? { Self.decodeActivity(hub.activity) }

    /// `activity` now (once joined), then each value set by any participant.
    public var activityUpdates: ActivityUpdates<ActivityType> { ActivityUpdates(base: hub.activityStream()) }

    /// Starts following the session: participants, activity, messages and attachments arrive from now on.
    public func join() async throws(HuddleKitError) { try await hub.join() }

    /// Makes `activity` the group's activity for every participant (the last one set wins
    /// everywhere): in DrawTogether, a reset is a new canvas value.
    public func setActivity(_ activity: ActivityType) async throws(HuddleKitError) {
        try hub.requireJoined()
        let value: JSON = ["activity": .string(ActivityType.activityIdentifier), "value": try JSONCoding.json(activity)]
        _ = try await hub.connection.request("activity.set", ["value": value])
        hub.setLocalActivity(value)
    }

    /// Leaves the session: the node hands off the chunks only it holds, leaves and exits
    /// (CONTROL.md `leave`); the session is then `.invalidated(reason: .left)`.
    public func leave() async throws(HuddleKitError) { try await hub.end(leaveNode: true) }

    /// Stops following the session and closes the control connections; the node stays in the
    /// session. The session is then `.invalidated(reason: .left)`.
    public func disconnect() async { try? await hub.end(leaveNode: false) }

    static func decodeActivity(_ value: JSON) -> ActivityType? {
        guard let o = value.objectValue, o["activity"]?.stringValue == ActivityType.activityIdentifier,
              let inner = o["value"] else { return nil }
        return try? JSONCoding.decode(ActivityType.self, from: inner)
    }
}

/// The values a session's activity takes, decoded as the session's activity type (nil when no
/// activity of that type is set).
public struct ActivityUpdates<ActivityType: GroupActivity>: AsyncSequence, Sendable {
    /// An activity value, nil when none of this type is set.
    public typealias Element = ActivityType?
    /// The sequence never throws: it ends when the session is invalidated.
    public typealias Failure = Never
    let base: AsyncStream<JSON>

    /// An iterator starting with the value at the time the sequence was made (once joined).
    public func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator()) }

    /// Decodes each value as it comes.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<JSON>.Iterator
        /// The next activity value, or nil (the outer optional) once the session is invalidated.
        public mutating func next() async -> ActivityType?? {
            guard let value = await base.next() else { return nil }
            return .some(GroupSession<ActivityType>.decodeActivity(value))
        }
    }
}
