/// What a module's error codes say about themselves: the line a person reads for a message under
/// the code (by default the message alone). A conforming `line` adds no line break: one line in,
/// one line out.
public protocol ErrorCode: Sendable, Equatable {
    func line(_ message: String) -> String
}

extension ErrorCode {
    public func line(_ message: String) -> String { message }
}

/// An error as every Huddle module throws it: what failed (`code`, which a program matches, with
/// the payload a caller acts on) and the one line a person reads (`message`, with its context).
/// Each module has one, named for it and with codes of its own (`CryptoError`, `CoreError`,
/// `ControlError`, `NodeError`), as swift-nio-ssh has `NIOSSHError`.
///
/// Guarantees: two errors are equal when code and message are; `description` is the code's
/// `line` for the message, one line when the message is.
public struct CodedError<Codes: ErrorCode>: Error, CustomStringConvertible, Sendable, Equatable {
    /// The module's codes (`CoreError.Code` is `CoreErrorCode`).
    public typealias Code = Codes

    public let code: Code
    /// The failure in one line, with its context.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { code.line(message) }
}
