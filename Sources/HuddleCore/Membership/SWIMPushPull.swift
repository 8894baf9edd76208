/// The full-state exchange of push-pull (memberlist `pushPullNode`), carried by the node over a link.
///
/// Wire form: `version (1) | flags (u8: 1 join, 2 more) | count (u32) | member records`. Every
/// member record is a `MemberInfo` with its state and incarnation, self included. A state larger
/// than a link message should carry goes in parts (`parts`): `more` on every part but the last.
/// Guarantees: `decode` refuses a count the remaining bytes cannot hold (before allocating) or
/// above `maxMembers`, and unknown flags, and never traps.
public struct SWIMPushPull: Sendable, Equatable {
    public var join: Bool
    public var members: [MemberInfo]
    /// More parts of this state follow: the receiver merges this one, and answers (or, for a
    /// reply, ends the catch-up it asked for) only at the last.
    public var more: Bool

    public init(join: Bool, members: [MemberInfo], more: Bool = false) { self.join = join; self.members = members; self.more = more }

    public static let version: UInt8 = 1
    /// The largest member count accepted (a bound on what a peer can make us allocate).
    public static let maxMembers = 1 << 20

    public func encode() -> [UInt8] {
        var w = WireWriter(capacity: 6 + members.count * 96)
        w.u8(Self.version); w.u8((join ? 1 : 0) | (more ? 2 : 0)); w.u32(UInt32(truncatingIfNeeded: members.count))
        for m in members { m.encode(into: &w) }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> SWIMPushPull {
        var r = WireReader(bytes)
        let version = try r.u8("version")
        guard version == Self.version else { throw CoreError("unsupported push-pull version \(version)") }
        let flags = try r.u8("push-pull flags")
        guard flags & ~3 == 0 else { throw CoreError("bad push-pull flags") }
        let count = Int(try r.u32("member count"))
        guard count <= maxMembers, count * MemberInfo.minimumEncodedSize <= r.remaining else {
            throw CoreError("push-pull member count \(count) exceeds what the state can hold")
        }
        var members: [MemberInfo] = []
        members.reserveCapacity(count)
        for _ in 0..<count { members.append(try MemberInfo.decode(from: &r)) }
        try r.expectEnd("push-pull state")
        return SWIMPushPull(join: flags & 1 != 0, members: members, more: flags & 2 != 0)
    }
}
