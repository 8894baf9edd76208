/// The plaintext inside a sealed datagram: `version | sender | counter | kind | fields`.
/// The counter feeds the receiver's replay window: the window of the link key it opened under
/// (the sender counts per key), or, in the session-key form, the claimed sender's.
public struct DatagramPayload: Sendable, Equatable {
    public var sender: MemberID
    public var counter: UInt64
    public var content: Content

    public enum Content: Sendable, Equatable {
        /// An unreliable application message (no seq, no ordering).
        case message(WireMessage)
        /// A SWIM probe, reply or gossip datagram.
        case swim(SWIMMessage)
    }

    public init(sender: MemberID, counter: UInt64, content: Content) {
        self.sender = sender; self.counter = counter; self.content = content
    }

    public static let version: UInt8 = 1

    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: 64)
        w.u8(Self.version); w.member(sender); w.u64(counter)
        switch content {
        case let .message(m): w.u8(1); m.encode(into: &w)
        case let .swim(m): w.u8(2); w.raw(m.encode())
        }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> DatagramPayload {
        var r = WireReader(bytes)
        let version = try r.u8("version")
        guard version == Self.version else { throw CoreError("unsupported datagram version \(version)") }
        let sender = try r.member("sender")
        let counter = try r.count("counter")
        let content: Content
        switch try r.u8("kind") {
        case 1: content = .message(try WireMessage.decode(from: &r))
        case 2: content = .swim(try SWIMMessage.decode(try r.raw(r.remaining)))
        default: throw CoreError("unknown datagram kind")
        }
        try r.expectEnd("datagram")
        return DatagramPayload(sender: sender, counter: counter, content: content)
    }
}
