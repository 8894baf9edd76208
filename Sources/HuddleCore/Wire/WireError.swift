/// Why a byte string could not be decoded. Decoders throw this and never trap on bad input.
public struct WireError: Error, CustomStringConvertible, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }

    static func truncated(_ what: String) -> WireError { WireError("truncated \(what)") }
}
