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

    // Hashed exactly as its 64 bits are (the same seeded SipHash, so no easier to collide), through
    // the standard library's one-shot path for UInt64. The synthesized path goes through a Hasher
    // value call by call: member tables are looked up everywhere in the core, and that cost 19 % of
    // the 100-member session simulation (perf); a lookup takes about 40 % less this way.
    public func hash(into hasher: inout Hasher) { hasher.combine(raw) }
    public func _rawHashValue(seed: Int) -> Int { raw._rawHashValue(seed: seed) }
}
