import HuddleCrypto

/// One value of the session's activity, signed by the member that set it.
public struct ActivityRecord: Sendable, Equatable {
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

    static func decode(from r: inout WireReader) throws(WireError) -> ActivityRecord {
        ActivityRecord(lamport: try r.outbiddableCount("lamport"), setBy: try r.member("setter"), value: try r.bytes32(limit: 64 * 1024, "activity"),
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
public struct ActivityRegister: Sendable {
    public private(set) var current: ActivityRecord?
    private var lamport: UInt64 = 0

    public init() {}

    public var stamp: ActivityStamp? { current?.stamp }

    /// The Lamport time for a new set made here.
    public mutating func nextLamport() -> UInt64 {
        lamport += 1
        return lamport
    }

    /// Applies a record (already verified); true when it became the current value.
    public mutating func apply(_ record: ActivityRecord) -> Bool {
        lamport = max(lamport, record.lamport)
        if let current, record.stamp <= current.stamp { return false }
        current = record
        return true
    }
}
