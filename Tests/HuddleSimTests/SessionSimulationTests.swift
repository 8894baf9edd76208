import HuddleTestSupport
import HuddleCore
import Testing
@testable import HuddleSim

/// Whole sessions on `SessionCore` — the value the node runs — in the simulator.
/// `hostile`: one member lies on purpose, so forged messages are expected (and must be dropped).
private func expectClean(_ report: SessionReport, _ label: String, hostile: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) {
    let problems = report.violations
    #expect(problems.isEmpty, "\(label): \(problems.count) violations, e.g. \(problems.prefix(3))", sourceLocation: sourceLocation)
    if !hostile { #expect(report.forged == 0, sourceLocation: sourceLocation) }
    #expect(report.held.allSatisfy { $0 == 0 }, "\(label): hold-back not empty: \(report.held)", sourceLocation: sourceLocation)
    #expect(report.stored.allSatisfy { $0 == 0 }, "\(label): retransmit buffers not empty: \(report.stored)", sourceLocation: sourceLocation)
    let everyone = report.survivors.count
    #expect(report.liveViews.values.allSatisfy { $0 == everyone }, "\(label): views \(report.liveViews)", sourceLocation: sourceLocation)
    let deliveries = report.logs.filter(\.stayed).map(\.deliveries.count)
    print("session sim \(label): \(report.sent) sent, deliveries per member \(deliveries.min() ?? 0)–\(deliveries.max() ?? 0), \(report.datagrams) datagrams (\(report.sessionKeyedDatagrams) session-keyed, \(report.droppedDatagrams) did not open, refused \(Refusal.allCases.filter { report.refusals[$0] > 0 }.map { "\($0.rawValue) \(report.refusals[$0])" })), \(report.linkMessages) link messages, \(report.repairRequests) repair requests")
}

@Test func twentyMembersWithDatagramLossAndCrashesDeliverEverythingOnceInCausalOrder() async {
    var s = SessionScenario()
    s.members = 20
    s.seed = 3
    s.loss = 0.05
    s.rate = 2
    s.sendFor = 5
    s.settleFor = 15
    s.crashes = [(4, 3.5), (11, 5.0)]
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    expectClean(report, "20 members, 5 % loss, 2 crashes")
    #expect(report.survivors.count == 18)
    #expect(report.detection.values.allSatisfy { $0 != nil }, "every crash seen failed by every survivor: \(report.detection)")
    #expect(report.sent > 100)
    // Datagrams between members not linked yet went in the session-key form, and honest members
    // never tripped a datagram rule (the run is deterministic: a race here would show every time).
    #expect(report.sessionKeyedDatagrams > 0 && report.sessionKeyedDatagrams * 20 < report.datagrams, "\(report.sessionKeyedDatagrams) of \(report.datagrams)")
    #expect(report.droppedDatagrams == 0 && report.refusals.total == 0, "dropped \(report.droppedDatagrams), refused \(report.refusals)")
}

/// Issue 37: members that crash and restart from what they kept (CONTROL.md, Restart) come back as
/// the same members, and every log — theirs included, across the restart — is exactly once, in
/// causal order, with nothing lost.
@Test func membersThatRestartFromWhatTheyKeptMissNothingAndGetNothingTwice() async {
    var s = SessionScenario()
    s.members = 12
    s.seed = 37
    s.loss = 0.02
    s.rate = 3
    s.sendFor = 6
    s.settleFor = 15
    s.restarts = [(3, 3.5, 6.0), (7, 4.0, 4.3), (9, 5.0, 8.0)]
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    expectClean(report, "12 members, 3 restarts")
    #expect(report.survivors.count == 12, "the restarted members are in the session at the end: \(report.survivors)")
    #expect(report.honestMembersEvicted == 0)
    for member in [3, 7, 9] {
        let log = report.logs[member]
        #expect(log.stayed && log.deliveries.count > 20, "m\(member) delivered \(log.deliveries.count)")
    }
    #expect(report.liveViews.values.allSatisfy { $0 == 12 }, "\(report.liveViews)")
    // Without what they kept, restarted members would be new members (their old selves failed in every view).
    #expect(report.liveViews.count == 12)
}

@Test func messagingAndAnAttachmentTogetherReachEverySurvivorWhole() async {
    var s = SessionScenario()
    s.members = 16
    s.seed = 5
    s.loss = 0.05
    s.rate = 2
    s.sendFor = 5
    s.settleFor = 15
    s.crashes = [(7, 4.0)]
    s.lateJoins = [(12, 3.0)]
    s.attachment = (0, 2.5, 3 * 1_048_576 + 1000)
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    expectClean(report, "16 members, 5 % loss, a crash, a late join, a 3 MiB attachment")
    #expect(report.survivors.count == 15)
    #expect(report.survivors.allSatisfy { report.attachmentComplete[$0] != nil && report.attachmentIntact[$0] == true },
            "complete \(report.attachmentComplete), intact \(report.attachmentIntact)")
}

@Test func theSameSeedGivesTheSameRunAndAnotherSeedAnother() async {
    var s = SessionScenario()
    s.members = 8
    s.loss = 0.1
    s.sendFor = 2
    s.settleFor = 5
    s.crashes = [(3, 2.5)]
    s.trace = true
    let (a, b) = await offThePool { [s] in (SessionSimulation.run(s), SessionSimulation.run(s)) }
    #expect(a.traceDigest != nil && a.traceDigest == b.traceDigest && a.traceRecords == b.traceRecords)
    #expect((a.traceRecords ?? 0) > 500)
    s.seed = 2
    let other = await offThePool { [s] in SessionSimulation.run(s) }
    #expect(other.traceDigest != a.traceDigest)
}

/// Issue 19's acceptance scenario: 100 members on the real core with datagram loss, crashes and a
/// partition long enough that each side fails the other, messaging and a 20 MiB attachment together.
@Test func aHundredMembersWithLossCrashesAndAPartitionGetEveryMessageOnceAndTheAttachmentWhole() async {
    let s = SessionScenario.hundredMembersUnderFaults
    #expect(s.members == 100 && s.partition != nil && s.attachment?.size == 20 * 1_048_576)
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    expectClean(report, "100 members, 5 % loss, 3 crashes, a 10 s partition, a 20 MiB attachment")
    #expect(report.survivors.count == 97)
    #expect(report.failedAcrossPartition > 0 && report.aliveAfterPartition > 0,
            "the partition failed members on the other side and healed: \(report.failedAcrossPartition) failed, \(report.aliveAfterPartition) alive")
    #expect(report.survivors.allSatisfy { report.attachmentComplete[$0] != nil && report.attachmentIntact[$0] == true },
            "complete \(report.attachmentComplete.count) of \(report.survivors.count), intact \(report.attachmentIntact.values.filter { $0 }.count)")
    #expect(report.detection.values.allSatisfy { $0 != nil }, "every crash seen failed by every survivor: \(report.detection)")
    print("session sim N=100: \(report.failedAcrossPartition) failed events across the partition, \(report.aliveAfterPartition) alive after; attachment complete at the last survivor \(report.attachmentComplete.values.max() ?? -1) s")
}

/// Issue 20, item 6, in the simulator: one of 16 members lies to every peer twice a second while
/// everyone sends and an attachment spreads — forged records and claims, a key takeover, a member
/// nobody is, catch-ups nobody asked for, a journal entry and a message in others' names, and a
/// directed message sent again and again. Nobody is misled: every message once, in causal order,
/// no honest member failed or evicted, every view whole, and every kind of lie refused and counted.
@Test func aHostileMemberAmongSixteenMisleadsNobody() async {
    var s = SessionScenario()
    s.members = 16
    s.seed = 23
    s.loss = 0.02
    s.rate = 2
    s.sendFor = 6
    s.settleFor = 10
    s.hostile = 5
    s.attachment = (0, 2.5, 2 * 1_048_576)
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    expectClean(report, "16 members, one hostile", hostile: true)
    #expect(report.lies > 100, "the hostile member lied \(report.lies) times")
    #expect(report.honestMembersEvicted == 0)
    #expect(report.survivors.allSatisfy { report.liveViews[$0] == 16 }, "\(report.liveViews)")
    #expect(report.survivors.allSatisfy { report.attachmentComplete[$0] != nil && report.attachmentIntact[$0] == true })
    #expect(report.forged > 0, "messages in another origin's name are dropped as forged")
    for reason in [Refusal.keyChange, .unsignedRecord, .unsignedClaim, .claimAboveIncarnation, .unsolicitedCatchUp, .journalNotByUploader,
                   .linkForPinnedMember, .recordNodeKey, .strangerLinks] {
        #expect(report.refusals[reason] > 0, "\(reason.rawValue) refused: \(report.refusals[reason])")
    }
    // Link admission (issue 35, item 3): no link in another member's name, and links from ids
    // nobody knows up to the limit at one member, the rest refused.
    #expect(report.impostorLinksAdmitted == 0, "\(report.impostorLinksAdmitted) links admitted in another member's name")
    #expect(report.strangerLinksAdmitted > 0 && report.strangerLinksAdmitted <= SessionCore.strangerLinkLimit,
            "\(report.strangerLinksAdmitted) stranger links admitted at once (limit \(SessionCore.strangerLinkLimit))")
}
