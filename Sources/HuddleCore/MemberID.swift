/// Names one run of one node: 64 random bits chosen at start, so a restarted node is a new member.
/// Its text form (16 lowercase hex digits) is the `member` string of the control protocol.
public struct MemberID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let raw: UInt64
    public init(raw: UInt64) { self.raw = raw }

    public init?(_ text: String) {
        guard text.utf8.count == 16, let v = UInt64(text, radix: 16) else { return nil }
        raw = v
    }

    public var description: String {
        let hex = String(raw, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    public static func < (a: MemberID, b: MemberID) -> Bool { a.raw < b.raw }
}
