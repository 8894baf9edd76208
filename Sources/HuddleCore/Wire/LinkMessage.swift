/// Everything a member says to another over an established link. Encoded as
/// `version (1) | kind (1) | fields`; an unknown version or kind is a decode error, which closes the link.
public enum LinkMessage: Sendable, Equatable {
    /// First message on every link: the sender's own broadcast seq at the moment the link was
    /// registered (the receiver's baseline for it).
    case hello(ownSeq: UInt64)
    /// A SWIM push-pull: the sender's full membership state; the receiver merges it and answers
    /// with `pushPullReply` carrying its own.
    case pushPull(SWIMPushPull)
    case pushPullReply(SWIMPushPull)
    /// A SWIM message sent over the link as well as by datagram (used for `leave`, so it is not lost).
    case swim(SWIMMessage)
    /// A reliable application message.
    case message(WireMessage)

    public static let version: UInt8 = 1

    private enum Kind: UInt8 { case hello = 1, pushPull = 2, message = 3, pushPullReply = 4, swim = 5 }

    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: 64)
        w.u8(Self.version)
        switch self {
        case let .hello(ownSeq):
            w.u8(Kind.hello.rawValue); w.u64(ownSeq)
        case let .pushPull(state):
            w.u8(Kind.pushPull.rawValue); w.raw(state.encode())
        case let .pushPullReply(state):
            w.u8(Kind.pushPullReply.rawValue); w.raw(state.encode())
        case let .swim(message):
            w.u8(Kind.swim.rawValue); w.raw(message.encode())
        case let .message(m):
            w.u8(Kind.message.rawValue); m.encode(into: &w)
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
        case .hello: result = .hello(ownSeq: try r.u64("seq"))
        case .pushPull: result = .pushPull(try SWIMPushPull.decode(try r.raw(r.remaining)))
        case .pushPullReply: result = .pushPullReply(try SWIMPushPull.decode(try r.raw(r.remaining)))
        case .swim: result = .swim(try SWIMMessage.decode(try r.raw(r.remaining)))
        case .message: result = .message(try WireMessage.decode(from: &r))
        case nil: throw WireError("unknown link message kind")
        }
        try r.expectEnd("link message")
        return result
    }
}
