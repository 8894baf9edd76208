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
// @unchecked Sendable, proven below: nothing is mutated after `init` except through the hub's Mutex.
public final class GroupSession<ActivityType: GroupActivity>: Identifiable, @unchecked Sendable {
    // @unchecked: the only stored properties are `hub` (a `let` of a Sendable class) and the three
    // `SessionPublished` wrappers (`_state`, `_activeParticipants`, `_activity`): `var` only because
    // property wrappers must be, assigned once in `init` and never again (their setters are
    // `nonmutating` and write through the hub's Mutex), each a struct of `@Sendable` closures.

    /// SharePlay's name for the session's state.
    public typealias State = GroupSessionState

    let hub: SessionHub

    /// Where the session is in its life; `$state.values` yields it now, then each change, and
    /// ends after `.invalidated`.
    @SessionPublished public private(set) var state: State

    /// The programs taking part in this activity now, on any node, this one included (issue 38:
    /// a node with no program joined is no participant; a program that joins later is new); empty
    /// before the join is done. A program stops being one when it leaves or ends the session, when
    /// its control connection closes (it exited) or when its node fails. `$activeParticipants.values` yields it now (once joined), then each
    /// time it changes: new participants are `new.subtracting(old)`.
    @SessionPublished public private(set) var activeParticipants: Set<Participant>

    /// What the group is doing, or nil when no activity of this type is set (none yet, or another
    /// kind of app's). Setting it changes it for every participant as SharePlay's settable
    /// `activity` does: here at once, at the node in the background (a refusal is not reported:
    /// `setActivity(_:)` throws it). `$activity.values` yields it now (once joined), then each value.
    @SessionPublished public var activity: ActivityType?

    private init(hub: SessionHub) {
        self.hub = hub
        _state = SessionPublished(read: { hub.state }, updates: { hub.stateStream() })
        _activeParticipants = SessionPublished(read: { hub.participants }, updates: { hub.participantStream() })
        _activity = SessionPublished(
            read: { GroupSession.decodeActivity(hub.activity) },
            write: { value in
                guard let value, let json = try? GroupSession.activityValue(value, hub: hub) else { return }
                hub.setLocalActivity(json)
                Task { _ = try? await hub.connection.request(.activitySet(value: json)) }
            },
            updates: { AsyncStream.mapping(hub.activityStream()) { GroupSession.decodeActivity($0) } })
    }

    /// Connects to the node whose control socket is at `control` (default: `$HUDDLE_CONTROL`, else
    /// `$XDG_RUNTIME_DIR/huddle.sock`, else `/tmp/huddle-$UID.sock`). The session is `.waiting`
    /// until `join()`. (`ActivityType.sessions()` is SharePlay's way to the same session.)
    ///
    /// - Parameters:
    ///   - replayingHistory: deliver, at `join()`, the messages the node retained from before this
    ///     program connected (a program that restarts, or one that renders what the node saw).
    ///   - reconnectTimeout: how long a lost connection is retried before the session is invalidated.
    public static func connect(control: String? = nil, replayingHistory: Bool = false,
                               reconnectTimeout: Duration = .seconds(30)) async throws(HuddleKitError) -> GroupSession {
        let connection = NodeConnection(path: ControlPath.resolve(control), reconnectTimeout: reconnectTimeout)
        let status = try await connection.open()
        let me = Participant(id: Participant.programID(Participant.newProgram()), member: status.member, node: status.node, name: status.name)
        return GroupSession(hub: SessionHub(connection: connection, localParticipant: me, activityType: ActivityType.activityIdentifier,
                                            replayingHistory: replayingHistory, sessionFingerprint: status.session))
    }

    /// The same at every participant: the activation id for a session from `sessions()`, else the
    /// Huddle session's fingerprint.
    public var id: String {
        if let activation = hub.activation, !activation.isEmpty { return activation }
        return hub.sessionFingerprint
    }

    /// Whether this participant's node started the activity (`activate()` or `setActivity` here);
    /// false for a session made with `connect`.
    public var isLocallyInitiated: Bool { hub.activationSetBy == hub.localParticipant.member }

    /// This program's own participant (a program id chosen at `connect`, on its node's member).
    public var localParticipant: Participant { hub.localParticipant }

    /// `activeParticipants` now (once joined), then each time it changes (the same as `$activeParticipants.values`).
    public var activeParticipantsUpdates: AsyncStream<Set<Participant>> { hub.participantStream() }

    /// `state` now, then each change; ends after `.invalidated` (the same as `$state.values`).
    public var stateUpdates: AsyncStream<State> { hub.stateStream() }

    /// `activity` now (once joined), then each value set by any participant.
    public var activityUpdates: ActivityUpdates<ActivityType> { ActivityUpdates(base: hub.activityStream()) }

    /// Starts following the session, as SharePlay's `join()`: returns at once. This program becomes
    /// a participant of the activity (`participant.join` on a connection of its own). Participants,
    /// activity, messages and attachments arrive from then on; a send, an `add` or any request made
    /// before the join is done waits for it. A failed join invalidates the session with its reason.
    public func join() { _ = hub.startJoining() }

    /// Joins and returns once joined (participants, activity and attachments are current), or
    /// throws why it could not.
    public func joinAndWait() async throws(HuddleKitError) { try await hub.join() }

    /// Makes `activity` the group's activity for every participant (the last one set wins
    /// everywhere): in DrawTogether, a reset is a new canvas value. Returns once the node took it.
    public func setActivity(_ activity: ActivityType) async throws(HuddleKitError) {
        try await hub.requireJoined()
        let value = try Self.activityValue(activity, hub: hub)
        _ = try await hub.connection.request(.activitySet(value: value))
        hub.setLocalActivity(value)
    }

    /// Leaves the session, as SharePlay's `leave()`: this program stops following it and its
    /// control connections close, so it is no longer a participant anywhere; the node stays in the
    /// Huddle session and every other program stays. The session is then
    /// `.invalidated(reason: .left)`.
    public func leave() { hub.invalidate(.left) }  // closes the connections (`SessionHub.invalidate`)

    /// Ends the activity for everyone, as SharePlay's `end()`: every participant's session of this
    /// activation becomes `.invalidated(reason: .ended)` when the value reaches its node; this one
    /// at once. The node stays in the Huddle session.
    public func end() {
        let hub = hub
        var ended = hub.activity.objectValue ?? ["activity": .string(ActivityType.activityIdentifier)]
        ended["ended"] = .bool(true)
        if let activation = hub.activation { ended["activation"] = .string(activation) }
        hub.invalidate(.ended, closing: false)
        Task {
            _ = try? await hub.connection.request(.activitySet(value: .object(ended)))
            await hub.connection.stop()
        }
    }

    /// Makes this program's node leave the Huddle session: it hands off the chunks only it holds,
    /// leaves and exits (CONTROL.md `leave`, `huddle leave`); the session is then
    /// `.invalidated(reason: .left)`. Every program on that node loses the session.
    public func leaveWithNode() async throws(HuddleKitError) { try await hub.end(leaveNode: true) }

    /// Stops following the session and closes the control connections; the node stays in the
    /// session (as `leave()`, but returns once the connections are closed).
    public func disconnect() async { try? await hub.end(leaveNode: false) }

    /// The value `activity.set` carries for `activity`: tagged with its type and this session's activation.
    static func activityValue(_ activity: ActivityType, hub: SessionHub) throws(HuddleKitError) -> JSON {
        try ActivityValue.make(activity, activation: hub.activation ?? hub.activity.objectValue?["activation"]?.stringValue)
    }

    static func decodeActivity(_ value: JSON) -> ActivityType? {
        guard let o = value.objectValue, o["activity"]?.stringValue == ActivityType.activityIdentifier,
              o["ended"]?.boolValue != true, let inner = o["value"] else { return nil }
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
