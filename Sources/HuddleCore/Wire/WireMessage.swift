/// One application message as it crosses the wire, on a link (reliable) or in a datagram (unreliable).
public struct WireMessage: Sendable, Equatable {
    /// The member that made the message and signed it.
    public var origin: MemberID
    /// Per-origin counter over every message it sends; with `origin` it names the message (`msg`).
    public var counter: UInt64
    /// Broadcast sequence number, 0 for directed and unreliable sends.
    public var seq: UInt64
    /// What the body is: an application message, or a session activity value.
    public var kind: Kind
    /// For a broadcast: how many of its origin's broadcasts before this one were not messages
    /// (journal entries). Signed with the message, so a member that never delivers some of an
    /// origin's broadcasts (a `gap`) still numbers its later messages as every member does
    /// (`ApplicationSeqs`). Always 0 for directed and unreliable sends, and not on the wire for them.
    public var nonApplicationBefore: UInt64
    /// Causal dependencies: member → seq that must be delivered first.
    public var deps: [Dependency]
    /// Targets of a directed send; nil for a broadcast.
    public var to: [MemberID]?
    public var body: [UInt8]

    public enum Kind: UInt8, Sendable { case application = 0, activity = 1, journal = 2 }

    public struct Dependency: Sendable, Equatable {
        public var member: MemberID
        public var seq: UInt64
        public init(member: MemberID, seq: UInt64) { self.member = member; self.seq = seq }
    }

    public init(origin: MemberID, counter: UInt64, seq: UInt64, kind: Kind = .application, nonApplicationBefore: UInt64 = 0,
                deps: [Dependency] = [], to: [MemberID]?, body: [UInt8]) {
        self.origin = origin; self.counter = counter; self.seq = seq; self.kind = kind
        self.nonApplicationBefore = seq == 0 ? 0 : min(nonApplicationBefore, seq - 1)
        self.deps = deps; self.to = to; self.body = body
    }

    /// The control protocol's `msg` string.
    public var id: String { "\(origin)-\(counter)" }

    /// Largest body any decoder accepts; the node enforces its own, lower, configured limit on send.
    public static let maximumBody = 1 << 20

    func encode(into w: inout WireWriter) {
        w.member(origin); w.u64(counter); w.u64(seq); w.u8(kind.rawValue)
        if seq != 0 { w.u64(nonApplicationBefore) }
        w.u16(UInt16(truncatingIfNeeded: deps.count))
        for d in deps { w.member(d.member); w.u64(d.seq) }
        if let to {
            w.u8(1); w.u16(UInt16(truncatingIfNeeded: to.count))
            for m in to { w.member(m) }
        } else {
            w.u8(0)
        }
        w.bytes32(body)
    }

    static func decode(from r: inout WireReader) throws(CoreError) -> WireMessage {
        let origin = try r.member("origin")
        let counter = try r.count("counter")
        let seq = try r.madeCount("seq")
        guard let kind = Kind(rawValue: try r.u8("message kind")) else { throw CoreError("unknown message kind") }
        var nonApplicationBefore: UInt64 = 0
        if seq != 0 {
            nonApplicationBefore = try r.madeCount("non-application count")
            guard nonApplicationBefore < seq else { throw CoreError("non-application count \(nonApplicationBefore) is not below seq \(seq)") }
        }
        let depCount = try r.count16(minItemSize: 16, "dependencies")
        var deps: [Dependency] = []
        deps.reserveCapacity(depCount)
        for _ in 0..<depCount { deps.append(Dependency(member: try r.member(), seq: try r.madeCount("dependency seq"))) }
        var to: [MemberID]?
        switch try r.u8("target flag") {
        case 0: to = nil
        case 1:
            let n = try r.count16(minItemSize: 8, "targets")
            var list: [MemberID] = []
            list.reserveCapacity(n)
            for _ in 0..<n { list.append(try r.member("target")) }
            to = list
        default: throw CoreError("bad target flag")
        }
        let body = try r.bytes32(limit: maximumBody, "message body")
        return WireMessage(origin: origin, counter: counter, seq: seq, kind: kind, nonApplicationBefore: nonApplicationBefore, deps: deps, to: to, body: body)
    }
}
