/// A settings file or flag that cannot be used, as one line: where (`FILE:LINE`, `FILE` or
/// `--flag`) and what is wrong.
public struct SettingError: Error, CustomStringConvertible, Sendable, Equatable {
    /// `FILE:LINE`, `FILE`, or `--flag`.
    public let place: String
    public let message: String
    public init(place: String, message: String) {
        self.place = place
        self.message = message
    }
    public var description: String { "\(place): \(message)" }
}
