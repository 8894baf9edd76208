import Testing
@testable import HuddleCore

@Test func swimRetransmitLimitGrowsWithLog10OfN() {
    // λ = 6 by default.
    #expect(SWIMInstance(local: swimInfo(1), seed: 1, signer: UncheckedMembershipSigner()).retransmitLimit == 6)          // N = 1: ceil(log10 2) = 1
    #expect(swimInstance(knowing: Array(2...9)).retransmitLimit == 6)                // N = 9: ceil(log10 10) = 1
    #expect(swimInstance(knowing: Array(2...10)).retransmitLimit == 12)              // N = 10: ceil(log10 11) = 2
    #expect(swimInstance(knowing: Array(2...100)).retransmitLimit == 18)             // N = 100: ceil(log10 101) = 3
    var custom = SWIMSettings.lan
    custom.retransmitMult = 4
    #expect(swimInstance(knowing: Array(2...100), settings: custom).retransmitLimit == 12)
}

@Test func swimAnUpdateIsSentExactlyLimitTimes() {
    var q = SWIMBroadcastQueue()
    q.enqueue(.left(swimID(5), incarnation: 1))
    for _ in 0..<6 { #expect(q.take(budget: 1000, limit: 6) == [.left(swimID(5), incarnation: 1)]) }
    #expect(q.take(budget: 1000, limit: 6).isEmpty)
    #expect(q.isEmpty)
}

@Test func swimANewerUpdateReplacesTheOlderOneAboutTheSameMember() {
    var q = SWIMBroadcastQueue()
    q.enqueue(.alive(swimInfo(5)))
    _ = q.take(budget: 1000, limit: 4)
    q.enqueue(.suspect(swimID(5), incarnation: 0, from: swimID(2)))
    #expect(q.count == 1)
    #expect(q.take(budget: 1000, limit: 4) == [.suspect(swimID(5), incarnation: 0, from: swimID(2))])
    #expect(q.pending(swimID(5)) == .suspect(swimID(5), incarnation: 0, from: swimID(2)))
}

@Test func swimTakesRespectTheBudgetFavourTheLeastSentAndNeverRepeat() {
    var q = SWIMBroadcastQueue()
    for n in 10..<40 { q.enqueue(.alive(swimInfo(UInt64(n)))) }
    let size = SWIMGossip.alive(swimInfo(10)).encodedSize
    var sent: [MemberID: Int] = [:]
    while !q.isEmpty {
        let batch = q.take(budget: 5 * size + 3, limit: 3)
        #expect(!batch.isEmpty && batch.count <= 5)
        #expect(Set(batch.map(\.member)).count == batch.count)
        for g in batch { sent[g.member, default: 0] += 1 }
        // Fewest transmissions first: nobody is ahead of anyone by more than one send.
        let counts = sent.values
        #expect((counts.max() ?? 0) - (counts.min() ?? 0) <= 1 || sent.count < 30)
    }
    #expect(sent.count == 30 && sent.values.allSatisfy { $0 == 3 })
    // Newest first among equals.
    q.enqueue(.left(swimID(1), incarnation: 1))
    q.enqueue(.left(swimID(2), incarnation: 1))
    #expect(q.take(budget: 19, limit: 3) == [.left(swimID(2), incarnation: 1)])
}

@Test func swimUpdatesArePiggybackedOnProbesAndGossipedToFanoutMembers() throws {
    var s = swimInstance(knowing: Array(2...20))  // learning 19 members queued 19 alive updates
    let out = s.tick(now: 0.5)
    let ping = try #require(out.sent.first { if case .ping = $0.message.kind { true } else { false } })
    #expect(!ping.message.gossip.isEmpty)
    let gossips = out.sent.filter { $0.message.kind == .gossip }
    #expect(gossips.count == SWIMSettings.lan.gossipFanout)
    // Eventually every update has been sent its limit and the queue is empty.
    var t = 0.5
    while s.pendingBroadcasts > 0 && t < 30 { t += 0.1; _ = s.tick(now: t) }
    #expect(s.pendingBroadcasts == 0)
}

@Test func swimSuspicionsByDifferentSuspectersAreGossipedSideBySideUntilAnotherUpdateReplacesThem() {
    var q = SWIMBroadcastQueue()
    let a = SWIMGossip.suspect(swimID(5), incarnation: 0, from: swimID(2))
    let b = SWIMGossip.suspect(swimID(5), incarnation: 0, from: swimID(3))
    q.enqueue(a)
    q.enqueue(b)
    q.enqueue(a)  // the same suspecter again replaces its own
    #expect(q.count == 2)
    #expect(Set(q.take(budget: 1000, limit: 4).map { "\($0)" }) == Set([a, b].map { "\($0)" }))
    #expect(q.pending(swimID(5)) == a)
    // Any other update about the member (a refutation here) replaces every pending suspicion.
    var refuted = swimInfo(5); refuted.incarnation = 1
    q.enqueue(.alive(refuted))
    #expect(q.count == 1)
    #expect(q.take(budget: 1000, limit: 4) == [.alive(refuted)])
    // And a suspicion replaces a pending alive, as before.
    q.enqueue(b)
    #expect(q.count == 1 && q.pending(swimID(5)) == b)
}
