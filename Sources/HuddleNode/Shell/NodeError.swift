import HuddleErrors

/// Every error HuddleNode throws, as one line a user can act on: what failed (`code`, which a
/// program matches) and the line itself (`message`, with its context). One type for the module,
/// as swift-nio-ssh's `NIOSSHError`.
public typealias NodeError = CodedError<NodeErrorCode>

/// What failed (`NodeError.code`): a program matches it; the payload is what a caller acts on.
public enum NodeErrorCode: ErrorCode {
    /// The node could not start or went wrong (a file, a socket, a peer): `message` says what.
    case failed
    /// A settings file or flag that cannot be used (`setting(place:message:)`).
    case setting
    /// A link handshake that did not finish (a wrong key, a closed connection, a bad message):
    /// a dialer tries the next older key it holds.
    case handshake
}

extension CodedError where Codes == NodeErrorCode {
    /// The node could not start or went wrong (`Code.failed`).
    public init(_ message: String) { self.init(.failed, message) }

    /// A settings file or flag that cannot be used: where (`FILE:LINE`, `FILE` or `--flag`) and
    /// what is wrong.
    public static func setting(place: String, message: String) -> NodeError { NodeError(.setting, "\(place): \(message)") }
}
