import Testing
@testable import HuddleCore

/// Broadcast seqs to the control protocol's message seqs (`ApplicationSeqs`).
private let origin = MemberID(raw: 9)

@Test func journalEntriesTakeNoMessageSeq() {
    var seqs = ApplicationSeqs()
    // origin's broadcasts: 1 message, 2 journal, 3 message, 4 journal, 5 journal, 6 message
    for s: UInt64 in [2, 4, 5] { seqs.noteNonApplication(origin, s) }
    #expect([1, 3, 6].map { seqs.applicationSeq(origin, $0) } == [1, 2, 3])
    #expect(seqs.nonApplication(origin, upTo: 5) == 3)
    #expect(seqs.applicationSeq(origin, 0) == 0)
    #expect(seqs.applicationSeq(MemberID(raw: 1), 7) == 7, "an origin without journal entries keeps its seqs")
}

@Test func aJoinerNumbersLikeEveryoneFromTheCountItIsGiven() {
    var early = ApplicationSeqs()
    for s: UInt64 in [2, 4, 5] { early.noteNonApplication(origin, s) }
    // A joiner starts at the sponsor's clock 5, told that 3 of those 5 broadcasts were not messages.
    var joiner = ApplicationSeqs()
    joiner.start(origin, at: 5, count: early.nonApplication(origin, upTo: 5))
    early.noteNonApplication(origin, 7); joiner.noteNonApplication(origin, 7)
    for s: UInt64 in [6, 8] { #expect(joiner.applicationSeq(origin, s) == early.applicationSeq(origin, s)) }
    #expect(joiner.applicationSeq(origin, 5) == 2, "its baseline counts the origin's messages")
    #expect(joiner.applicationSeq(origin, 3) <= joiner.applicationSeq(origin, 5), "below the baseline: never above it")
}

@Test func aLaterStartMovesForwardButNeverBack() {
    var seqs = ApplicationSeqs()
    seqs.start(origin, at: 4, count: 1)
    seqs.noteNonApplication(origin, 6)
    seqs.start(origin, at: 2, count: 0)  // an older starting point is ignored
    #expect(seqs.applicationSeq(origin, 7) == 5)
    seqs.start(origin, at: 8, count: 3)
    #expect(seqs.applicationSeq(origin, 9) == 6)
    seqs.start(origin, at: 10, count: 99)  // a peer cannot claim more than the seq it counts to
    #expect(seqs.applicationSeq(origin, 10) == 0 && seqs.applicationSeq(origin, 11) == 1)
}
