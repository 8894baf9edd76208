/// What a group does together: a `Codable` value every participant sees, as SharePlay's
/// `GroupActivity` is. Setting a new value (`GroupSession.setActivity`) is how an app starts
/// something new for everyone: DrawTogether sets a new canvas this way.
///
/// Guarantees: the value travels as the session's activity (`activity.set`, CONTROL.md), tagged
/// with `activityIdentifier`; a session whose activity another kind of app set reads as `nil`.
public protocol GroupActivity: Codable, Sendable {
    /// Names the kind of activity; by default the type's name.
    static var activityIdentifier: String { get }
}

extension GroupActivity {
    /// The type's name, as `String(describing:)` writes it.
    public static var activityIdentifier: String { String(describing: Self.self) }
}
