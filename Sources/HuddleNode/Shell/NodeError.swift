/// Why a node could not start or went wrong, as one line a user can act on.
public struct NodeError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
