/// Everything a member says to another over an established link. Encoded as
/// `version (1) | kind (1) | fields`; an unknown version or kind is a decode error, which closes the link.
public enum LinkMessage: Sendable, Equatable {
    /// First message on every link: the sender's own broadcast seq at the moment the link was
    /// registered (the receiver's baseline for it) and the members the sender knows.
    case hello(ownSeq: UInt64, members: [MemberInfo])
    /// Membership news: members that appeared or changed state.
    case members([MemberInfo])
    /// A reliable application message.
    case message(WireMessage)
    /// The sender is leaving the session for good.
    case leave

    public static let version: UInt8 = 1

    private enum Kind: UInt8 { case hello = 1, members = 2, message = 3, leave = 4 }

    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: 64)
        w.u8(Self.version)
        switch self {
        case let .hello(ownSeq, members):
            w.u8(Kind.hello.rawValue); w.u64(ownSeq); Self.encode(members, into: &w)
        case let .members(members):
            w.u8(Kind.members.rawValue); Self.encode(members, into: &w)
        case let .message(m):
            w.u8(Kind.message.rawValue); m.encode(into: &w)
        case .leave:
            w.u8(Kind.leave.rawValue)
        }
        return w.bytes
    }

    /// Whether an encoded link message carries an application message (for byte counters by kind).
    public static func carriesApplicationMessage(_ encoded: [UInt8]) -> Bool {
        encoded.count > 1 && encoded[1] == Kind.message.rawValue
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> LinkMessage {
        var r = WireReader(bytes)
        let version = try r.u8("version")
        guard version == Self.version else { throw WireError("unsupported link message version \(version)") }
        let result: LinkMessage
        switch Kind(rawValue: try r.u8("kind")) {
        case .hello: result = .hello(ownSeq: try r.u64("seq"), members: try decodeMembers(&r))
        case .members: result = .members(try decodeMembers(&r))
        case .message: result = .message(try WireMessage.decode(from: &r))
        case .leave: result = .leave
        case nil: throw WireError("unknown link message kind")
        }
        try r.expectEnd("link message")
        return result
    }

    private static func encode(_ members: [MemberInfo], into w: inout WireWriter) {
        w.u16(UInt16(truncatingIfNeeded: members.count))
        for m in members { m.encode(into: &w) }
    }

    private static func decodeMembers(_ r: inout WireReader) throws(WireError) -> [MemberInfo] {
        let n = try r.count16(minItemSize: MemberInfo.minimumEncodedSize, "member list")
        var list: [MemberInfo] = []
        list.reserveCapacity(n)
        for _ in 0..<n { list.append(try MemberInfo.decode(from: &r)) }
        return list
    }
}
