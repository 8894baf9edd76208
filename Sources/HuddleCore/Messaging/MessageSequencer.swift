/// Numbers this member's messages and decides which received messages to deliver (messaging v0).
///
/// Guarantees, over links that deliver in order: every reliable broadcast is delivered here at most
/// once, and from each origin with `seq` increasing by exactly one after the baseline that origin
/// announced when its link came up. Directed and unreliable sends carry no broadcast seq.
public struct MessageSequencer: Sendable {
    public let local: MemberID
    public private(set) var ownSeq: UInt64 = 0
    private var counter: UInt64 = 0
    /// Highest broadcast seq delivered here per origin, self included.
    public private(set) var clock: [MemberID: UInt64] = [:]
    /// Per origin, the seq it announced when its link to this member came up.
    public private(set) var baseline: [MemberID: UInt64] = [:]
    /// Broadcasts that arrived after a gap (should never happen over in-order links); counted for stats.
    public private(set) var gaps: UInt64 = 0

    public init(local: MemberID) { self.local = local }

    /// A reliable broadcast from this member; it is delivered here too.
    public mutating func makeBroadcast(body: [UInt8]) -> WireMessage {
        ownSeq += 1
        counter += 1
        clock[local] = ownSeq
        return WireMessage(from: local, counter: counter, seq: ownSeq, to: nil, body: body)
    }

    /// A directed or unreliable send: a new message id, no broadcast seq.
    public mutating func makeUnsequenced(body: [UInt8], to: [MemberID]?) -> WireMessage {
        counter += 1
        return WireMessage(from: local, counter: counter, seq: 0, to: to, body: body)
    }

    /// `origin` said in its hello that it had sent `seq` broadcasts when the link came up.
    public mutating func linkBaseline(origin: MemberID, seq: UInt64) {
        guard baseline[origin] == nil else { return }
        baseline[origin] = seq
        clock[origin] = max(clock[origin] ?? 0, seq)
    }

    /// Whether a received reliable message is to be delivered.
    public mutating func accept(_ m: WireMessage) -> Bool {
        guard m.seq != 0 else { return true }
        let have = clock[m.from] ?? 0
        guard m.seq > have else { return false }
        if m.seq != have + 1 { gaps += 1 }
        clock[m.from] = m.seq
        return true
    }
}
