import Testing
@testable import HuddleCore

@Test func broadcastsAreNumberedAndDeliveredOnce() {
    var a = MessageSequencer(local: MemberID(raw: 1))
    var b = MessageSequencer(local: MemberID(raw: 2))
    b.linkBaseline(origin: MemberID(raw: 1), seq: a.ownSeq)
    let m1 = a.makeBroadcast(body: [1])
    let m2 = a.makeBroadcast(body: [2])
    #expect(m1.seq == 1 && m2.seq == 2)
    #expect(m1.id != m2.id)
    let r1 = b.accept(m1)
    #expect(r1)
    let r2 = b.accept(m1)
    #expect(!r2)
    let r3 = b.accept(m2)
    #expect(r3)
    #expect(b.clock[MemberID(raw: 1)] == 2)
    #expect(b.gaps == 0)
}

@Test func baselineSkipsWhatWasSentBeforeTheLink() {
    var a = MessageSequencer(local: MemberID(raw: 1))
    _ = a.makeBroadcast(body: [])
    _ = a.makeBroadcast(body: [])
    var b = MessageSequencer(local: MemberID(raw: 2))
    b.linkBaseline(origin: MemberID(raw: 1), seq: a.ownSeq)
    #expect(b.baseline[MemberID(raw: 1)] == 2)
    let r4 = b.accept(a.makeBroadcast(body: []))
    #expect(r4)
    #expect(b.gaps == 0)
}

@Test func directedSendsHaveNoSeqAndNewIds() {
    var a = MessageSequencer(local: MemberID(raw: 1))
    let d = a.makeUnsequenced(body: [], to: [MemberID(raw: 2)])
    #expect(d.seq == 0)
    #expect(a.ownSeq == 0)
    var b = MessageSequencer(local: MemberID(raw: 2))
    let r5 = b.accept(d)
    #expect(r5)
}
