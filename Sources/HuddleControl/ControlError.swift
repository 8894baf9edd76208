/// The error codes of the control protocol (CONTROL.md); the raw value is the wire string.
public enum ControlErrorCode: String, Sendable {
    case badRequest = "bad_request"
    case notFound = "not_found"
    case tooLarge = "too_large"
    case busy
    case unavailable
    case timeout
    case ioError = "io_error"
    case notMember = "not_member"
    case `internal`
}

/// An error a node answers with: a code a program can switch on and a message a person can read.
public struct ControlError: Error, CustomStringConvertible, Sendable, Equatable {
    public let code: ControlErrorCode
    public let message: String

    public init(code: ControlErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// Builds reply objects exactly as CONTROL.md shapes them.
public enum ControlReply {
    public static func ok(id: JSON, _ fields: JSONObject) -> JSONObject {
        var reply: JSONObject = ["id": id, "ok": true]
        for (key, value) in fields { reply[key] = value }
        return reply
    }

    public static func error(id: JSON, _ error: ControlError) -> JSONObject {
        ["id": id, "ok": false, "error": ["code": .string(error.code.rawValue), "message": .string(error.message)]]
    }
}
