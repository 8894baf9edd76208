import HuddleControl

/// Why a HuddleKit call failed, with the node's own message when the node refused it.
///
/// Guarantees: every error code of the control protocol (CONTROL.md) maps to exactly one case, and
/// `description` is one line a person can read (the node's message, without wrappers).
public enum HuddleKitError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The message or attachment is over the node's limit (64 KiB messages, 1 KiB unreliable, 100 MiB attachments).
    case tooLarge(String)
    /// The session could not take more right now (backpressure did not clear in time); try again.
    case busy(String)
    /// No live member holds what was asked for, or the peer is unreachable.
    case unavailable(String)
    /// The node gave up waiting.
    case timeout(String)
    /// No such attachment or member.
    case notFound(String)
    /// The node refused the request as malformed: a HuddleKit bug or a node of another version.
    case badRequest(String)
    /// The node could not read or write a file.
    case ioError(String)
    /// The node is not (or no longer) a member of a session.
    case notMember(String)
    /// The node failed internally.
    case nodeFailed(String)
    /// Nothing listens at the control socket.
    case noNode(path: String)
    /// The connection to the node was lost (a reconnect is tried in the background).
    case disconnected
    /// The node behind the control socket is a new run (it restarted): this session is over.
    case nodeRestarted
    /// This program left the session (`leave` or `disconnect`).
    case left
    /// A participant ended the activity for everyone (`GroupSession.end()`).
    case ended
    /// A value could not be encoded to JSON.
    case encodingFailed(String)
    /// A value from the session could not be decoded as the type asked for.
    case decodingFailed(String)

    /// The error for a node's refusal, or for a failure on this side of the control socket.
    init(_ error: ControlError) {
        switch error.code {
        case .tooLarge: self = .tooLarge(error.message)
        case .busy: self = .busy(error.message)
        case .unavailable: self = .unavailable(error.message)
        case .timeout: self = .timeout(error.message)
        case .notFound: self = .notFound(error.message)
        case .badRequest: self = .badRequest(error.message)
        case .ioError: self = .ioError(error.message)
        case .notMember: self = .notMember(error.message)
        case .internal: self = .nodeFailed(error.message)
        case let .noNode(path): self = .noNode(path: path)
        case .closed: self = .disconnected
        case let .badReply(why): self = .nodeFailed("unreadable reply: \(why)")
        case .untrustedPath, .notJSON: self = .nodeFailed(error.message)
        }
    }

    /// The error for anything a control call can throw.
    static func from(_ error: any Error) -> HuddleKitError {
        switch error {
        case let e as HuddleKitError: e
        case let e as ControlError: HuddleKitError(e)
        default: .nodeFailed(String(describing: error))
        }
    }

    /// One line a person can read, ending with the node's own message when there is one.
    public var description: String {
        switch self {
        case let .tooLarge(m): "too large: \(m)"
        case let .busy(m): "busy: \(m)"
        case let .unavailable(m): "unavailable: \(m)"
        case let .timeout(m): "timed out: \(m)"
        case let .notFound(m): "not found: \(m)"
        case let .badRequest(m): "refused by the node: \(m)"
        case let .ioError(m): "i/o error: \(m)"
        case let .notMember(m): "not a member: \(m)"
        case let .nodeFailed(m): "the node failed: \(m)"
        case let .noNode(path): "no Huddle node is running at \(path)"
        case .disconnected: "the connection to the node was lost"
        case .nodeRestarted: "the node restarted: this session is over"
        case .left: "this program left the session"
        case .ended: "a participant ended the activity for everyone"
        case let .encodingFailed(m): "cannot encode: \(m)"
        case let .decodingFailed(m): "cannot decode: \(m)"
        }
    }
}
