import HuddleCrypto

/// Participants are programs (issue 38): the rules that say which programs take part in activities
/// on which member, and who learns it.
///
/// - A program joins on its member's node (`joinProgram`) and is gone when it leaves
///   (`leaveProgram`; the node calls it too when the program's control connection closes).
/// - Each member sends its whole set as one record signed by its node key
///   (`ParticipantRecord`), on every link: at once when it changes, and to a link that has not had
///   the current version at the next tick (a new link, or one that came back).
/// - A record is believed only from the link of the member it is about, signed by that member's
///   pinned node key (the key its link's handshake proved, for a joiner not yet in the table), for a
///   member that has not left or been removed, within `ParticipantTable`'s budget (64 programs,
///   16 KiB), with one entry per program. Anything else is refused and counted.
/// - A member's programs are shown while it is live and its link is up; when its link goes down,
///   or it fails, leaves or is removed, its record is forgotten and its programs are gone here at
///   once (a killed node's link closes at once; one that vanishes is gone when SWIM suspects it
///   and the link is closed, at the latest when it is declared failed).
extension SessionCore {
    /// Program `id` of this member joins `activity` (a program already joined moves to it).
    public mutating func joinProgram(_ id: UInt64, activity: String) throws(CoreError) -> [SessionEffect] {
        guard (1...ParticipantRecord.maximumActivityBytes).contains(activity.utf8.count) else { throw .badActivity }
        if presence.localPrograms[id] == nil, presence.localFull { throw .participantsFull }
        return changeLocalProgram(id, activity: activity)
    }

    /// Program `id` of this member is no longer a participant (nothing when it was not one).
    public mutating func leaveProgram(_ id: UInt64) -> [SessionEffect] {
        changeLocalProgram(id, activity: nil)
    }

    private mutating func changeLocalProgram(_ id: UInt64, activity: String?) -> [SessionEffect] {
        guard let version = presence.setLocal(id, activity: activity) else { return [] }
        let programs = presence.localPrograms.map { ProgramPresence(id: $0.key, activity: $0.value) }
        presence.setLocalRecord(ParticipantRecord.make(member: local, version: version, programs: programs, identity: identity))
        return showParticipants(of: local) + sendParticipantRecord()
    }

    /// This member's record to every link that has not had its current version.
    mutating func sendParticipantRecord() -> [SessionEffect] {
        guard let record = presence.localRecord else { return [] }
        var out: [SessionEffect] = []
        for peer in planner.linked.sorted() where presence.sentTo[peer] != record.version {
            presence.sentTo[peer] = record.version
            out.append(.sendLink(peer, .participants(record)))
        }
        return out
    }

    /// A record that came over the link to `peer`.
    mutating func receiveParticipants(_ record: ParticipantRecord, from peer: MemberID) -> [SessionEffect] {
        // Only the member itself speaks for its programs.
        guard record.member == peer, peer != local else { return refuse(.participantsNotBySigner) }
        if removedMembers.contains(peer) || swim.members[peer]?.state == .left { return refuse(.participantsDeparted) }
        guard let key = swim.members[peer]?.node ?? epochLinks[peer]?.node, record.verify(nodeKey: key) else {
            return [.forged(origin: peer, count: 1)]
        }
        guard ParticipantTable.withinBudget(record) else { return refuse(.participantBudget) }
        guard Set(record.programs.map(\.id)).count == record.programs.count else { return refuse(.participantsMalformed) }
        if let held = presence.records[peer], record.version <= held.version { return [] }
        presence.records[peer] = record
        return showParticipants(of: peer)
    }

    /// Shows `member`'s programs as its record says when it may be shown (this member, or a live
    /// member with its link up), else hides them.
    mutating func showParticipants(of member: MemberID) -> [SessionEffect] {
        let programs: [ProgramPresence]
        if member == local {
            programs = presence.localRecord?.programs ?? []
        } else if isLive(member), planner.linked.contains(member), let record = presence.records[member] {
            programs = record.programs
        } else {
            programs = []
        }
        let changes = presence.show(member, Set(programs))
        return changes.isEmpty ? [] : [.participants(changes)]
    }

    /// `member`'s link went down, or it departed: its record is forgotten and its programs hidden
    /// (a link that comes back brings its current record).
    mutating func forgetParticipants(of member: MemberID) -> [SessionEffect] {
        guard member != local else { return [] }
        presence.records[member] = nil
        presence.sentTo[member] = nil
        return showParticipants(of: member)
    }

    /// What a membership change means for `member`'s programs.
    mutating func participantsAfter(_ change: MemberChange, of member: MemberID) -> [SessionEffect] {
        switch change {
        case .failed, .left, .removed: forgetParticipants(of: member)
        default: showParticipants(of: member)
        }
    }
}
