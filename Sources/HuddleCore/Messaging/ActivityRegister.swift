import HuddleCrypto

/// One value of the session's activity, signed by the member that set it.
public struct ActivityRecord: Sendable, Equatable, StoredForm {
    public var lamport: UInt64
    public var setBy: MemberID
    /// The value as JSON text (UTF-8).
    public var value: [UInt8]
    public var signature: [UInt8]

    /// The (Lamport time, member) order that decides between concurrent sets.
    public var stamp: ActivityStamp { ActivityStamp(lamport: lamport, member: setBy) }

    static let domain = Array("huddle-activity v1".utf8)

    func signedBytes() -> [UInt8] {
        var w = WireWriter(capacity: 32 + value.count)
        w.raw(Self.domain); w.u64(lamport); w.member(setBy); w.raw(value)
        return w.bytes
    }

    public static func make(lamport: UInt64, setBy: MemberID, value: [UInt8], identity: Identity) -> ActivityRecord {
        var record = ActivityRecord(lamport: lamport, setBy: setBy, value: value, signature: [])
        record.signature = identity.sign(record.signedBytes())
        return record
    }

    public func verify(nodeKey: [UInt8]) -> Bool {
        Identity.verify(signature: signature, message: signedBytes(), publicKey: nodeKey)
    }

    func encode(into w: inout WireWriter) {
        w.u64(lamport); w.member(setBy); w.bytes32(value); w.raw(signature)
    }

    /// The stored form (a restart's activity value, `ResumePoint.activity`).
    public func encoded() -> [UInt8] { storedBytes(capacity: 96 + value.count) }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> ActivityRecord { try decodeWhole(bytes, "activity record") }

    static func decode(from r: inout WireReader) throws(CoreError) -> ActivityRecord {
        ActivityRecord(lamport: try r.madeCount("lamport"), setBy: try r.member("setter"), value: try r.bytes32(limit: 64 * 1024, "activity"),
                       signature: try r.raw(64, "activity signature"))
    }
}

/// Orders activity values: higher Lamport time wins, ties go to the higher member id.
public struct ActivityStamp: Sendable, Comparable, Equatable {
    public var lamport: UInt64
    public var member: MemberID
    public static func < (a: ActivityStamp, b: ActivityStamp) -> Bool { (a.lamport, a.member) < (b.lamport, b.member) }
}

/// The session-wide activity: a last-writer-wins register (SharePlay's GroupSession.activity).
/// Guarantee: members that have seen the same records hold the same value, whatever the order
/// they saw them in; a set made here is ordered after every set this member had seen.
///
/// Its Lamport times are a hybrid logical clock (Kulkarni et al., 2014): a set takes the larger of
/// the last time seen plus one and the wall clock (`ticksPerSecond`), and a record more than
/// `maximumSkew` ahead of this member's wall clock is refused (`admits`) until that clock reaches
/// it. A plain Lamport counter let one member set the largest time a peer decodes: no later set
/// could pass it (an honest set made the next time, which no peer decoded, and cut its setter
/// off). Now a hostile member is ahead by at most `maximumSkew`: an honest set made after that wins.
/// Members whose clocks differ by more see a faster member's sets late (when their clocks reach
/// them), never lose them: the record is offered again (`SessionCore.activityResend`).
public struct ActivityRegister: Sendable {
    public private(set) var current: ActivityRecord?
    private var lamport: UInt64 = 0

    /// Lamport ticks per second of wall clock: 1,024 per millisecond, so up to 1,024 sets per
    /// millisecond keep wall-clock order, and times stay under `WireReader.madeCountLimit` until 2109.
    public static let ticksPerSecond: Double = 1_024_000
    /// How far ahead of this member's wall clock a record's time may be, in seconds.
    public static let maximumSkew: Double = 30

    public init() {}

    public var stamp: ActivityStamp? { current?.stamp }

    /// The Lamport time of `wallClock` (seconds since 1970), 0 before it and never past `madeCountLimit`.
    static func ticks(_ wallClock: Double) -> UInt64 {
        let ticks = wallClock * Self.ticksPerSecond
        guard ticks.isFinite, ticks > 0 else { return 0 }
        return ticks >= Double(WireReader.madeCountLimit) ? WireReader.madeCountLimit : UInt64(ticks)
    }

    /// The Lamport time for a new set made here at `wallClock`.
    public mutating func nextLamport(wallClock: Double) -> UInt64 {
        lamport = max(lamport < WireReader.madeCountLimit ? lamport + 1 : lamport, Self.ticks(wallClock))
        return lamport
    }

    /// Whether a record's time is within `maximumSkew` of `wallClock` (it may be applied).
    public static func admits(_ record: ActivityRecord, wallClock: Double) -> Bool {
        record.lamport <= ticks(wallClock + maximumSkew)
    }

    /// Applies a record (already verified and admitted); true when it became the current value.
    public mutating func apply(_ record: ActivityRecord) -> Bool {
        lamport = max(lamport, record.lamport)
        if let current, record.stamp <= current.stamp { return false }
        current = record
        return true
    }
}
