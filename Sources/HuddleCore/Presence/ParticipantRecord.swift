import HuddleCrypto

/// One program taking part in an activity on a member's node (issue 38): what `activeParticipants`
/// lists. `id` is chosen by the node for the program's control connection; the pair (member, id)
/// names the participant everywhere.
public struct ProgramPresence: Sendable, Hashable, Comparable {
    /// The program's id on its member's node (shown as 16 hex digits).
    public var id: UInt64
    /// The activity the program joined (HuddleKit: its activity type and activation), 1 to
    /// `ParticipantRecord.maximumActivityBytes` UTF-8 bytes.
    public var activity: String

    public init(id: UInt64, activity: String) {
        self.id = id
        self.activity = activity
    }

    public static func < (a: ProgramPresence, b: ProgramPresence) -> Bool { (a.id, a.activity) < (b.id, b.activity) }
}

/// A member's whole set of participating programs, signed by that member's node key: what it
/// sends to each linked peer (`LinkMessage.participants`). A newer record (higher `version`)
/// replaces the older one whole.
///
/// Guarantees: `verify` accepts only a record signed by the node key given, over the domain, the
/// member, the version and every program; `decode` reads any bytes from a peer without trapping and
/// allocates at most what the bytes hold (the budget is the core's, `ParticipantTable`).
public struct ParticipantRecord: Sendable, Equatable {
    public var member: MemberID
    public var version: UInt64
    /// Sorted by id, one entry per program.
    public var programs: [ProgramPresence]
    public var signature: [UInt8]

    /// Longest activity string, in UTF-8 bytes: 64 programs of the longest activity stay under
    /// `ParticipantTable.maximumRecordBytes`.
    public static let maximumActivityBytes = 200
    static let domain = Array("huddle-participants v1".utf8)

    func signedBytes() -> [UInt8] {
        var w = WireWriter(capacity: 48 + programs.count * 24)
        w.raw(Self.domain); w.member(member); w.u64(version)
        encodePrograms(into: &w)
        return w.bytes
    }

    /// A record of `programs` (sorted here) signed by `identity`.
    public static func make(member: MemberID, version: UInt64, programs: [ProgramPresence], identity: Identity) -> ParticipantRecord {
        var record = ParticipantRecord(member: member, version: version, programs: programs.sorted(), signature: [])
        record.signature = identity.sign(record.signedBytes())
        return record
    }

    /// Whether `nodeKey` signed this record.
    public func verify(nodeKey: [UInt8]) -> Bool {
        Identity.verify(signature: signature, message: signedBytes(), publicKey: nodeKey)
    }

    /// The encoded size (what the per-member byte budget counts).
    public var encodedSize: Int { 8 + 8 + 2 + programs.reduce(0) { $0 + 10 + $1.activity.utf8.count } + 64 }

    private func encodePrograms(into w: inout WireWriter) {
        w.u16(UInt16(truncatingIfNeeded: programs.count))
        for p in programs { w.u64(p.id); w.string16(p.activity) }
    }

    func encode(into w: inout WireWriter) {
        w.member(member); w.u64(version)
        encodePrograms(into: &w)
        w.raw(signature)
    }

    static func decode(from r: inout WireReader) throws(CoreError) -> ParticipantRecord {
        let member = try r.member("participants member")
        let version = try r.count("participants version")
        let n = try r.count16(minItemSize: 10, "participants")
        var programs: [ProgramPresence] = []
        programs.reserveCapacity(n)
        for _ in 0..<n {
            programs.append(ProgramPresence(id: try r.u64("program id"), activity: try r.string16("activity", limit: maximumActivityBytes)))
        }
        return ParticipantRecord(member: member, version: version, programs: programs, signature: try r.raw(64, "participants signature"))
    }
}
