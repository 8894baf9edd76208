import Testing
@testable import HuddleCore

private func info(_ n: UInt64) -> MemberInfo {
    MemberInfo(id: MemberID(raw: n), node: [UInt8](repeating: 1, count: 32), name: "n\(n)", addr: "127.0.0.1:\(n)")
}

@Test func linkUpMakesAMemberAliveAndAnnouncesIt() {
    var m = MeshMembership(local: info(1))
    let actions = m.linkEstablished(info(2), now: 0)
    #expect(actions.contains(.emit(.joined, info(2))))
    #expect(actions.contains(.announce([info(2)], except: MemberID(raw: 2))))
    #expect(m.aliveCount == 2)
    let r1 = m.linkEstablished(info(2), now: 0).isEmpty
    #expect(r1)
}

@Test func lowerIdDialsLearnedMembersAndHigherWaitsForGrace() {
    var low = MeshMembership(local: info(1))
    let r2 = low.receive(members: [info(5)], from: MemberID(raw: 9), now: 0) == [.dial(addr: info(5).addr, member: MemberID(raw: 5))]
    #expect(r2)
    var high = MeshMembership(local: info(9))
    let r3 = high.receive(members: [info(5)], from: MemberID(raw: 1), now: 0).isEmpty
    #expect(r3)
    let r4 = high.tick(now: 0.5).isEmpty
    #expect(r4)
    let r5 = high.tick(now: 1.1) == [.dial(addr: info(5).addr, member: MemberID(raw: 5))]
    #expect(r5)
    let r6 = high.tick(now: 1.5).isEmpty
    #expect(r6)
    let r7 = high.tick(now: 3.2).count == 1
    #expect(r7)
    let r8 = high.tick(now: 100).isEmpty
    #expect(r8)
}

@Test func closedLinkIsFailedUnlessTheMemberSaidLeave() {
    var m = MeshMembership(local: info(1))
    _ = m.linkEstablished(info(2), now: 0)
    _ = m.linkEstablished(info(3), now: 0)
    m.receiveLeave(from: MemberID(raw: 3))
    var failed = info(2); failed.state = .failed
    var left = info(3); left.state = .left
    let r9 = m.linkClosed(MemberID(raw: 2), now: 1).first == .emit(.failed, failed)
    #expect(r9)
    let r10 = m.linkClosed(MemberID(raw: 3), now: 1).first == .emit(.left, left)
    #expect(r10)
    let r11 = m.linkClosed(MemberID(raw: 3), now: 1).isEmpty
    #expect(r11)
    #expect(m.aliveCount == 1)
}

@Test func aMemberThatEndedNeverReturns() {
    var m = MeshMembership(local: info(1))
    _ = m.linkEstablished(info(2), now: 0)
    _ = m.linkClosed(MemberID(raw: 2), now: 1)
    let r12 = m.linkEstablished(info(2), now: 2).isEmpty
    #expect(r12)
    let r13 = m.receive(members: [info(2)], from: MemberID(raw: 3), now: 2).isEmpty
    #expect(r13)
    #expect(m.members[MemberID(raw: 2)]?.state == .failed)
}

@Test func duplicateLinksKeepTheOneDialedByTheLowerId() {
    #expect(MeshMembership.keepsNewLink(newDialedBy: MemberID(raw: 1), existingDialedBy: MemberID(raw: 2)))
    #expect(!MeshMembership.keepsNewLink(newDialedBy: MemberID(raw: 2), existingDialedBy: MemberID(raw: 1)))
}
