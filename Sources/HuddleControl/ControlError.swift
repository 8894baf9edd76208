import HuddleErrors

/// Every error HuddleControl throws: what failed (`code`, which a program matches) and the one
/// line a person reads (`message`, with its context). One type for the module, as swift-nio-ssh's
/// `NIOSSHError`.
///
/// Guarantees: the control protocol's error codes (CONTROL.md) are the codes whose `Code.wire` is
/// not nil, spelled on the wire as CONTROL.md spells them; every other code is a failure on this
/// side (a client's, a path check's, a parser's) that a node never answers with
/// (`ControlReply.error` maps one explicitly to `internal`). `description` is the line as the
/// module always printed it: `code: message` for a node's refusal, the message alone otherwise.
public typealias ControlError = CodedError<ControlErrorCode>

/// What failed (`ControlError.code`): a program matches it; the payload is what a caller acts on.
public enum ControlErrorCode: ErrorCode {
    // The control protocol's error codes (CONTROL.md): what a node answers with.
    /// `bad_request`: the request is malformed or asks for something impossible.
    case badRequest
    /// `not_found`: no such attachment, member or participant.
    case notFound
    /// `too_large`: over a limit.
    case tooLarge
    /// `busy`: backpressure did not clear in time.
    case busy
    /// `unavailable`: no live member holds it, or the peer is unreachable.
    case unavailable
    /// `timeout`: the node gave up waiting.
    case timeout
    /// `io_error`: the node could not read or write a file.
    case ioError
    /// `not_member`: the node is not (or no longer) a member of a session.
    case notMember
    /// `internal`: the node failed internally.
    case `internal`

    // Failures on this side: never on the wire.
    /// Nothing listens at the control path (the CLI exits 3).
    case noNode(path: String)
    /// The node closed the connection before answering.
    case closed
    /// The node wrote something that is not a reply a client can read: why.
    case badReply(String)
    /// The path, or its directory, belongs to another user or can be swapped by one
    /// (`ControlPathCheck`): not connected to, not bound.
    case untrustedPath
    /// A text is not the JSON the parser accepts (`JSON.parse`).
    case notJSON

    /// The control protocol's codes, in CONTROL.md's order.
    public static let wireCodes: [ControlErrorCode] = [.badRequest, .notFound, .tooLarge, .busy, .unavailable, .timeout, .ioError, .notMember, .internal]

    /// The code as the wire spells it (CONTROL.md); nil for a failure on this side, which is
    /// never on the wire.
    public var wire: String? {
        switch self {
        case .badRequest: "bad_request"
        case .notFound: "not_found"
        case .tooLarge: "too_large"
        case .busy: "busy"
        case .unavailable: "unavailable"
        case .timeout: "timeout"
        case .ioError: "io_error"
        case .notMember: "not_member"
        case .internal: "internal"
        case .noNode, .closed, .badReply, .untrustedPath, .notJSON: nil
        }
    }

    /// A node's refusal reads `code: message`; a failure on this side, the message alone.
    public func line(_ message: String) -> String {
        if let wire { "\(wire): \(message)" } else { message }
    }

    /// The protocol's code the wire string `wire` names; nil for one CONTROL.md does not name.
    public init?(wire: String) {
        guard let code = Self.wireCodes.first(where: { $0.wire == wire }) else { return nil }
        self = code
    }
}

extension CodedError where Codes == ControlErrorCode {
    /// Nothing listens at `path`.
    public static func noNode(path: String) -> ControlError { ControlError(.noNode(path: path), "no node is running at \(path)") }
    /// The node closed the connection before answering.
    public static var closed: ControlError { ControlError(.closed, "the node closed the control connection") }
    /// The node wrote something a client cannot read: `why`.
    public static func badReply(_ why: String) -> ControlError { ControlError(.badReply(why), "unreadable reply from the node: \(why)") }
}

/// Builds reply objects exactly as CONTROL.md shapes them.
public enum ControlReply {
    public static func ok(id: JSON, _ fields: JSONObject) -> JSONObject {
        var reply: JSONObject = ["id": id, "ok": true]
        for (key, value) in fields { reply[key] = value }
        return reply
    }

    /// The error reply for `error`: its wire code and message. A failure on this side (no wire
    /// code) is never answered as such: a node that met one answers `internal` with its line.
    public static func error(id: JSON, _ error: ControlError) -> JSONObject {
        ["id": id, "ok": false, "error": ["code": .string(error.code.wire ?? "internal"), "message": .string(error.message)]]
    }
}
