/// The full-state exchange of push-pull (memberlist `pushPullNode`), carried by the node over a link.
///
/// Wire form: `version (1) | join (u8) | count (u32) | member records`. Every member record is a
/// `MemberInfo` with its state and incarnation, self included. Guarantees: `decode` refuses a count
/// the remaining bytes cannot hold (before allocating) or above `maxMembers`, and never traps.
public struct SWIMPushPull: Sendable, Equatable {
    public var join: Bool
    public var members: [MemberInfo]

    public init(join: Bool, members: [MemberInfo]) { self.join = join; self.members = members }

    public static let version: UInt8 = 1
    /// The largest member count accepted (a bound on what a peer can make us allocate).
    public static let maxMembers = 1 << 20

    public func encode() -> [UInt8] {
        var w = WireWriter(capacity: 6 + members.count * 96)
        w.u8(Self.version); w.u8(join ? 1 : 0); w.u32(UInt32(truncatingIfNeeded: members.count))
        for m in members { m.encode(into: &w) }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> SWIMPushPull {
        var r = WireReader(bytes)
        let version = try r.u8("version")
        guard version == Self.version else { throw WireError("unsupported push-pull version \(version)") }
        let join = try r.u8("join flag")
        guard join <= 1 else { throw WireError("bad push-pull join flag") }
        let count = Int(try r.u32("member count"))
        guard count <= maxMembers, count * MemberInfo.minimumEncodedSize <= r.remaining else {
            throw WireError("push-pull member count \(count) exceeds what the state can hold")
        }
        var members: [MemberInfo] = []
        members.reserveCapacity(count)
        for _ in 0..<count { members.append(try MemberInfo.decode(from: &r)) }
        try r.expectEnd("push-pull state")
        return SWIMPushPull(join: join == 1, members: members)
    }
}
