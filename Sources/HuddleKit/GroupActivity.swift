import Foundation
import HuddleControl

/// What a group does together: a `Codable` value every participant sees, as SharePlay's
/// `GroupActivity` is. `activate()` starts it for every member's programs (they get a session from
/// `sessions()`); setting `GroupSession.activity` changes it for everyone: DrawTogether sets a
/// new canvas this way.
///
/// Guarantees: the value travels as the session's activity (`activity.set`, CONTROL.md), tagged
/// with `activityIdentifier` and a fresh activation id per `activate()`; a session whose activity
/// another kind of app set reads as `nil`.
public protocol GroupActivity: Codable, Sendable {
    /// Names the kind of activity; by default the type's name.
    static var activityIdentifier: String { get }
    /// What the activity says about itself; by default its identifier as the title, `.generic`.
    var metadata: GroupActivityMetadata { get }
}

/// What `prepareForActivation()` found, as SharePlay's `GroupActivityActivationResult`.
public enum GroupActivityActivationResult: Sendable, Equatable {
    /// A node answers: `activate()` will start the activity for the session.
    case activationPreferred
    /// No node answers at the control path: there is no session to share it with.
    case activationDisabled
    /// Apple's "the user cancelled": never returned here (no dialog asks anyone).
    case cancelled
}

extension GroupActivity {
    /// The type's name, as `String(describing:)` writes it.
    public static var activityIdentifier: String { String(describing: Self.self) }

    /// The identifier as the title, `.generic` as the kind.
    public var metadata: GroupActivityMetadata {
        var m = GroupActivityMetadata()
        m.title = Self.activityIdentifier
        return m
    }

    /// Whether `activate()` can start the activity: `.activationPreferred` when the node at the
    /// control path (`GroupActivityEnvironment.control`, else the CLI's default) answers,
    /// `.activationDisabled` when none does. Never asks anyone anything.
    public func prepareForActivation() async -> GroupActivityActivationResult {
        guard let client = try? await ControlClient.connect(path: GroupActivityEnvironment.resolvedControl) else { return .activationDisabled }
        defer { Task { await client.close() } }
        return (try? await client.request(.status)) == nil ? .activationDisabled : .activationPreferred
    }

    /// Starts this activity for every member's programs: sets it as the session's activity with a
    /// new activation id, so every `sessions()` sequence on every node yields a new session for it.
    /// Returns true once the node took the value (it then spreads to every member); throws
    /// `.noNode` when no node answers, `.tooLarge` over 16 KiB.
    @discardableResult
    public func activate() async throws(HuddleKitError) -> Bool {
        let value = try ActivityValue.make(self, activation: ActivityValue.newActivation())
        let client: ControlClient
        do { client = try await ControlClient.connect(path: GroupActivityEnvironment.resolvedControl) } catch { throw HuddleKitError.from(error) }
        defer { Task { await client.close() } }
        do { _ = try await client.request(.activitySet(value: value)) } catch { throw HuddleKitError.from(error) }
        return true
    }

    /// The sessions of this activity from the node at the control path (`GroupActivityEnvironment.control`,
    /// else `$HUDDLE_CONTROL`, `$XDG_RUNTIME_DIR/huddle.sock`, `/tmp/huddle-$UID.sock`, as the CLI):
    /// one when the program starts and an activity of this type is set, then one per later
    /// `activate()` by any member. Each session is `.waiting`: set it up, then `join()`.
    /// Waits (retrying every 250 ms) while no node answers; ends when the task reading it is cancelled.
    public static func sessions() -> AsyncStream<GroupSession<Self>> {
        let control = GroupActivityEnvironment.resolvedControl
        return AsyncStream { continuation in
            let task = Task { await SessionsWatcher<Self>(control: control).run(into: continuation) }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// Where `GroupActivity.sessions()`, `activate()` and `prepareForActivation()` find the node.
///
/// Guarantees: a task-local value, so two tasks of one process (two programs in a test) may each
/// use their own node; unset, the CLI's default path is used.
public enum GroupActivityEnvironment {
    /// The control socket path for the current task; nil for the default.
    @TaskLocal public static var control: String?

    static var resolvedControl: String { ControlPath.resolve(control) }
}

/// The activity value as HuddleKit sets it: `{"activity": ID, "value": VALUE, "activation": A}`
/// (and `"ended": true` once a participant ended that activation).
enum ActivityValue {
    static func newActivation() -> String { UUID().uuidString.lowercased() }

    static func make<A: GroupActivity>(_ activity: A, activation: String?) throws(HuddleKitError) -> JSON {
        var o: JSONObject = ["activity": .string(A.activityIdentifier), "value": try JSONCoding.json(activity)]
        if let activation { o["activation"] = .string(activation) }
        return .object(o)
    }

    /// The activation id of a value of type `A`, "" for one set without an id; nil for another type's.
    static func activation<A: GroupActivity>(of value: JSON, as type: A.Type) -> String? {
        guard let o = value.objectValue, o["activity"]?.stringValue == A.activityIdentifier else { return nil }
        return o["activation"]?.stringValue ?? ""
    }

    static func isEnded(_ value: JSON) -> Bool { value.objectValue?["ended"]?.boolValue == true }
}
