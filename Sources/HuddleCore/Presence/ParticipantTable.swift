/// A participant joining or leaving, as this member shows it (the `participant` event).
public struct ParticipantChange: Sendable, Equatable {
    public enum Kind: String, Sendable { case joined, left }
    public var kind: Kind
    public var member: MemberID
    public var program: ProgramPresence

    public init(_ kind: Kind, member: MemberID, program: ProgramPresence) {
        self.kind = kind
        self.member = member
        self.program = program
    }
}

/// Which programs take part in activities, on this member's node and on the others: the records
/// peers sent, this member's own programs, and what is shown (`SessionCore+Participants`
/// decides what goes in; this value only keeps it).
///
/// Guarantees: at most `maximumPerMember` programs and `maximumRecordBytes` per member (records
/// beyond are refused whole by the core, local joins beyond are refused); what is shown changes
/// only through `show`, which returns exactly the difference as changes, in program order, so the
/// events a member emits add up to what it shows.
public struct ParticipantTable: Sendable {
    /// Most programs one member's record may list.
    public static let maximumPerMember = 64
    /// Largest record one member may send (encoded, signature included).
    public static let maximumRecordBytes = 16 * 1024

    /// This member's programs, by id.
    public private(set) var localPrograms: [UInt64: String] = [:]
    /// This member's current record (nil before its first program joined).
    public private(set) var localRecord: ParticipantRecord?
    private var localVersion: UInt64 = 0
    /// The record each linked peer last sent (kept while its link is up).
    public internal(set) var records: [MemberID: ParticipantRecord] = [:]
    /// The programs shown per member: what the events so far add up to.
    public private(set) var shown: [MemberID: Set<ProgramPresence>] = [:]
    /// Per linked peer, the version of this member's record it was sent.
    var sentTo: [MemberID: UInt64] = [:]

    public init() {}

    /// Every participant shown, in (member, program) order.
    public var participants: [(member: MemberID, program: ProgramPresence)] {
        shown.keys.sorted().flatMap { member in shown[member, default: []].sorted().map { (member, $0) } }
    }

    /// Whether this member holds no more room for a program.
    public var localFull: Bool { localPrograms.count >= Self.maximumPerMember }

    /// Adds (or, with `activity` nil, removes) one of this member's programs; returns the version of
    /// the record to sign, or nil when nothing changed.
    mutating func setLocal(_ id: UInt64, activity: String?) -> UInt64? {
        guard localPrograms[id] != activity else { return nil }
        localPrograms[id] = activity
        localVersion &+= 1
        return localVersion
    }

    mutating func setLocalRecord(_ record: ParticipantRecord) { localRecord = record }

    /// Shows `programs` for `member` (an empty set hides it); returns what changed.
    mutating func show(_ member: MemberID, _ programs: Set<ProgramPresence>) -> [ParticipantChange] {
        let before = shown[member, default: []]
        guard before != programs else { return [] }
        if programs.isEmpty { shown[member] = nil } else { shown[member] = programs }
        return before.subtracting(programs).sorted().map { ParticipantChange(.left, member: member, program: $0) }
            + programs.subtracting(before).sorted().map { ParticipantChange(.joined, member: member, program: $0) }
    }

    /// Whether `record` is within the per-member budget.
    static func withinBudget(_ record: ParticipantRecord) -> Bool {
        record.programs.count <= maximumPerMember && record.encodedSize <= maximumRecordBytes
    }
}
