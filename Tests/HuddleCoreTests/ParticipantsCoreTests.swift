import HuddleCrypto
import Testing
@testable import HuddleCore

/// Pure tests of "participants are programs" (issue 38, `SessionCore+Participants`): three members
/// a, b and mallory, linked with each other; a's and b's records cross as the node would carry them.
private struct Trio {
    var a: SessionCore
    var b: SessionCore
    let aInfo: MemberInfo, bInfo: MemberInfo, mInfo: MemberInfo
    let aIdentity: Identity
    let mallory: Identity

    init() {
        let aIdentity = Identity(seed: [UInt8](repeating: 1, count: 32)), mallory = Identity(seed: [UInt8](repeating: 9, count: 32))
        self.aIdentity = aIdentity
        self.mallory = mallory
        let bIdentity = Identity(seed: [UInt8](repeating: 2, count: 32))
        aInfo = MemberInfo(id: MemberID(raw: 1), node: aIdentity.publicKey, name: "a", addr: testAddr("a")).signed(by: aIdentity)
        bInfo = MemberInfo(id: MemberID(raw: 2), node: bIdentity.publicKey, name: "b", addr: testAddr("b")).signed(by: bIdentity)
        mInfo = MemberInfo(id: MemberID(raw: 3), node: mallory.publicKey, name: "m", addr: testAddr("m")).signed(by: mallory)
        a = SessionCore(local: aInfo, identity: aIdentity, joining: false, swimSeed: 1, journalSeed: 1)
        b = SessionCore(local: bInfo, identity: bIdentity, joining: false, swimSeed: 2, journalSeed: 2)
        _ = a.receivePushPull(SWIMPushPull(join: false, members: [bInfo, mInfo]), from: testAddr("b"), now: 1)
        _ = b.receivePushPull(SWIMPushPull(join: false, members: [aInfo, mInfo]), from: testAddr("a"), now: 1)
        _ = b.receiveLink(a.linkUp(bInfo.id), from: aInfo.id, addr: testAddr("a"), now: 1)
        _ = a.receiveLink(b.linkUp(aInfo.id), from: bInfo.id, addr: testAddr("b"), now: 1)
        _ = b.linkUp(mInfo.id)
        let keys = PairDatagramKeys(seed: [1, 2])
        a.installDatagramKeys(keys, for: bInfo.id, current: true, now: 1)
        b.installDatagramKeys(keys.reversed, for: aInfo.id, current: true, now: 1)
    }

    /// The participant records in `effects` that go to `peer`, as they arrive there (through the wire codec).
    static func records(_ effects: [SessionEffect], to peer: MemberID) throws -> [LinkMessage] {
        try effects.compactMap { effect -> LinkMessage? in
            guard case let .sendLink(p, message) = effect, p == peer, case .participants = message else { return nil }
            return try LinkMessage.decode(message.encoded())
        }
    }

    /// Program ids shown at `core`, by member.
    static func shown(_ core: SessionCore) -> [MemberID: Set<UInt64>] {
        core.presence.participants.reduce(into: [:]) { $0[$1.member, default: []].insert($1.program.id) }
    }
}

private func changes(_ effects: [SessionEffect]) -> [ParticipantChange] {
    var all: [ParticipantChange] = []
    for case let .participants(c) in effects { all += c }
    return all
}

@Test func aProgramIsAParticipantEverywhereFromItsJoinToItsLeaveAndANodeWithoutOneIsNone() throws {
    var t = Trio()
    #expect(t.a.presence.participants.isEmpty && t.b.presence.participants.isEmpty, "members without programs are no participants")
    let joined = try t.a.joinProgram(7, activity: "draw")
    #expect(changes(joined) == [ParticipantChange(.joined, member: t.aInfo.id, program: ProgramPresence(id: 7, activity: "draw"))])
    let sent = try Trio.records(joined, to: t.bInfo.id)
    #expect(sent.count == 1, "sent at once to the linked member")
    #expect(changes(t.b.receiveLink(sent[0], from: t.aInfo.id, addr: testAddr("a"), now: 2))
            == [ParticipantChange(.joined, member: t.aInfo.id, program: ProgramPresence(id: 7, activity: "draw"))])
    #expect(Trio.shown(t.b) == [t.aInfo.id: [7]])
    #expect(t.b.receiveLink(sent[0], from: t.aInfo.id, addr: testAddr("a"), now: 2).isEmpty, "the same version again changes nothing")
    // A second program on the same member is a new participant; the first one leaving is local to it.
    let second = try Trio.records(try t.a.joinProgram(8, activity: "draw"), to: t.bInfo.id)
    _ = t.b.receiveLink(second[0], from: t.aInfo.id, addr: testAddr("a"), now: 3)
    #expect(Trio.shown(t.b) == [t.aInfo.id: [7, 8]])
    let left = t.a.leaveProgram(7)
    #expect(changes(t.b.receiveLink(try Trio.records(left, to: t.bInfo.id)[0], from: t.aInfo.id, addr: testAddr("a"), now: 4))
            == [ParticipantChange(.left, member: t.aInfo.id, program: ProgramPresence(id: 7, activity: "draw"))])
    #expect(Trio.shown(t.b) == [t.aInfo.id: [8]] && Trio.shown(t.a) == [t.aInfo.id: [8]])
    #expect(t.a.leaveProgram(7).isEmpty, "leaving twice is nothing")
    // Nothing is sent again until a link has not had the current version: a link that comes back gets it at the next tick.
    #expect(try Trio.records(t.a.tick(now: 5), to: t.bInfo.id).isEmpty)
    _ = t.a.linkDown(t.bInfo.id, settled: false, now: 6)
    #expect(changes(t.b.linkDown(t.aInfo.id, settled: false, now: 6)).map(\.kind) == [.left], "a's programs go with its link")
    _ = t.b.receiveLink(t.a.linkUp(t.bInfo.id), from: t.aInfo.id, addr: testAddr("a"), now: 7)
    _ = t.a.receiveLink(t.b.linkUp(t.aInfo.id), from: t.bInfo.id, addr: testAddr("b"), now: 7)
    let again = try Trio.records(t.a.tick(now: 7), to: t.bInfo.id)
    #expect(again.count == 1)
    _ = t.b.receiveLink(again[0], from: t.aInfo.id, addr: testAddr("a"), now: 7)
    #expect(Trio.shown(t.b) == [t.aInfo.id: [8]])
}

@Test func aRecordAboutAnotherMembersProgramsOrNotSignedByItIsRefused() throws {
    var t = Trio()
    let program = [ProgramPresence(id: 1, activity: "draw")]
    // Mallory, over its own link, speaks for a: with a record it signed, and with a's own record replayed.
    let aboutA = ParticipantRecord.make(member: t.aInfo.id, version: 1, programs: program, identity: t.mallory)
    #expect(t.b.receiveLink(.participants(aboutA), from: t.mInfo.id, addr: testAddr("m"), now: 2) == [.refused(.participantsNotBySigner)])
    let real = try Trio.records(try t.a.joinProgram(5, activity: "draw"), to: t.bInfo.id)[0]
    #expect(t.b.receiveLink(real, from: t.mInfo.id, addr: testAddr("m"), now: 2).isEmpty, "counted, logged once")
    #expect(t.b.refusals[.participantsNotBySigner] == 2)
    // A record about a that a did not sign, even on a's link, is forged; so is one with no signature.
    let forged = ParticipantRecord.make(member: t.aInfo.id, version: 9, programs: program, identity: t.mallory)
    #expect(t.b.receiveLink(.participants(forged), from: t.aInfo.id, addr: testAddr("a"), now: 2) == [.forged(origin: t.aInfo.id, count: 1)])
    var unsigned = forged
    unsigned.signature = [UInt8](repeating: 0, count: 64)
    #expect(t.b.receiveLink(.participants(unsigned), from: t.aInfo.id, addr: testAddr("a"), now: 2) == [.forged(origin: t.aInfo.id, count: 1)])
    #expect(t.b.presence.participants.isEmpty)
    // a's own record, on a's link, is taken.
    _ = t.b.receiveLink(real, from: t.aInfo.id, addr: testAddr("a"), now: 3)
    #expect(Trio.shown(t.b) == [t.aInfo.id: [5]])
}

@Test func aFloodOfProgramsBeyondTheBudgetIsRefusedWholeAndCounted() throws {
    var t = Trio()
    let full = (1...UInt64(ParticipantTable.maximumPerMember)).map { ProgramPresence(id: $0, activity: "draw") }
    let flood = ParticipantRecord.make(member: t.mInfo.id, version: 1, programs: full + [ProgramPresence(id: 999, activity: "draw")], identity: t.mallory)
    let arrived = try LinkMessage.decode(LinkMessage.participants(flood).encoded())
    #expect(t.b.receiveLink(arrived, from: t.mInfo.id, addr: testAddr("m"), now: 2) == [.refused(.participantBudget)])
    #expect(t.b.presence.participants.isEmpty, "refused whole")
    let long = String(repeating: "x", count: ParticipantRecord.maximumActivityBytes + 1)
    let tooLong = ParticipantRecord.make(member: t.mInfo.id, version: 2, programs: [ProgramPresence(id: 1, activity: long)], identity: t.mallory)
    #expect(throws: CoreError.self, "an activity over the limit is not decoded") { _ = try LinkMessage.decode(LinkMessage.participants(tooLong).encoded()) }
    let twice = ParticipantRecord.make(member: t.mInfo.id, version: 3, programs: [ProgramPresence(id: 1, activity: "a"), ProgramPresence(id: 1, activity: "b")], identity: t.mallory)
    #expect(t.b.receiveLink(.participants(twice), from: t.mInfo.id, addr: testAddr("m"), now: 2) == [.refused(.participantsMalformed)])
    // Up to the budget is taken.
    let most = ParticipantRecord.make(member: t.mInfo.id, version: 4, programs: full, identity: t.mallory)
    #expect(changes(t.b.receiveLink(.participants(most), from: t.mInfo.id, addr: testAddr("m"), now: 3)).count == ParticipantTable.maximumPerMember)
    #expect(t.b.refusals[.participantBudget] == 1)
    // This member's own programs have the same budget.
    for id in 1...UInt64(ParticipantTable.maximumPerMember) { _ = try t.a.joinProgram(id, activity: "draw") }
    #expect(throws: CoreError.participantsFull) { _ = try t.a.joinProgram(1000, activity: "draw") }
    #expect(throws: CoreError.badActivity) { _ = try t.a.joinProgram(1, activity: "") }
    _ = try t.a.joinProgram(1, activity: "other")  // a joined program may move to another activity
}

@Test func aDepartedMembersProgramsAreGoneEverywhereAndItsLaterRecordsRefused() throws {
    var t = Trio()
    let record = try Trio.records(try t.a.joinProgram(5, activity: "draw"), to: t.bInfo.id)[0]
    _ = t.b.receiveLink(record, from: t.aInfo.id, addr: testAddr("a"), now: 2)
    #expect(Trio.shown(t.b) == [t.aInfo.id: [5]])
    // a leaves the session: its `left` reaches b, and with it a's programs go.
    var leaving: [SWIMMessage] = []
    for case let .sendDatagram(payload, _, _) in t.a.leave(now: 3) { if case let .swim(m) = payload.content { leaving.append(m) } }
    let message = try #require(leaving.first)
    let effects = t.b.receive(message, from: testAddr("a"), now: 3)
    #expect(t.b.swim.members[t.aInfo.id]?.state == .left)
    #expect(changes(effects) == [ParticipantChange(.left, member: t.aInfo.id, program: ProgramPresence(id: 5, activity: "draw"))])
    #expect(t.b.presence.participants.isEmpty && t.b.presence.records[t.aInfo.id] == nil)
    // A record of a departed member, however well signed, is refused.
    let late = ParticipantRecord.make(member: t.aInfo.id, version: 99, programs: [ProgramPresence(id: 6, activity: "draw")], identity: t.aIdentity)
    #expect(t.b.receiveLink(.participants(late), from: t.aInfo.id, addr: testAddr("a"), now: 4) == [.refused(.participantsDeparted)])
    #expect(t.b.presence.participants.isEmpty)
}

@Test func aJoinersRecordIsHeldUntilItIsAMemberThenShown() throws {
    var t = Trio()
    let joiner = Identity(seed: [UInt8](repeating: 4, count: 32))
    let jInfo = MemberInfo(id: MemberID(raw: 4), node: joiner.publicKey, name: "j", addr: testAddr("j")).signed(by: joiner)
    // The link is up before the joiner is in b's table (its push-pull comes over it).
    try t.b.admitLink(jInfo, now: 2)
    _ = t.b.linkUp(jInfo.id)
    let record = ParticipantRecord.make(member: jInfo.id, version: 1, programs: [ProgramPresence(id: 3, activity: "draw")], identity: joiner)
    #expect(t.b.receiveLink(.participants(record), from: jInfo.id, addr: testAddr("j"), now: 2).isEmpty)
    #expect(t.b.presence.participants.isEmpty, "not a member yet")
    let joined = t.b.receivePushPull(SWIMPushPull(join: false, members: [jInfo]), from: testAddr("j"), now: 3)
    #expect(changes(joined) == [ParticipantChange(.joined, member: jInfo.id, program: ProgramPresence(id: 3, activity: "draw"))])
}
