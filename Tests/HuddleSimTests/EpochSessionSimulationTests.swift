import HuddleTestSupport
import HuddleCore
import Testing
@testable import HuddleSim

/// Removal and rotation in whole simulated sessions (issue 21): the same `SessionCore` the node
/// runs, with every link admitted by the epoch rules and every session-key datagram under the
/// sender's epoch.
private func expectOneEpoch(_ report: SessionReport, _ epoch: UInt64, _ label: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(report.violations.isEmpty, "\(label): \(report.violations.prefix(3))", sourceLocation: sourceLocation)
    #expect(report.survivors.allSatisfy { report.epochs[$0] == epoch }, "\(label): epochs \(report.epochs)", sourceLocation: sourceLocation)
    #expect(Set(report.epochHeads.values).count == 1, "\(label): every survivor on one head", sourceLocation: sourceLocation)
    #expect(report.stored.allSatisfy { $0 == 0 }, "\(label): retransmit buffers not empty: \(report.stored)", sourceLocation: sourceLocation)
    #expect(report.liveViews.values.allSatisfy { $0 == report.survivors.count }, "\(label): views \(report.liveViews)", sourceLocation: sourceLocation)
}

@Test func aRemovalAndARekeyUnderLoadLoseNothingAndCutTheRemovedMemberOff() async {
    var s = SessionScenario()
    s.members = 8
    s.seed = 11
    s.loss = 0.02
    s.rate = 3
    s.sendFor = 6
    s.settleFor = 12
    s.epochChanges = [(by: 1, at: 4.0, remove: 5), (by: 2, at: 6.0, remove: nil)]
    s.attachment = (3, 6.5, 1_048_576)
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    expectOneEpoch(report, 2, "remove then rekey")
    #expect(report.removed == [5], "the removed member saw its removal")
    #expect(report.linksToRemoved == 0)
    #expect(report.survivors.count == 7)
    #expect(report.survivors.allSatisfy { report.attachmentComplete[$0] != nil }, "an attachment added after the removal reached every remaining member")
    // Every session-key datagram the removed member sent after its removal was refused or did not open.
    print("epoch sim: \(report.sent) sent, refused \(Refusal.allCases.filter { report.refusals[$0] > 0 }.map { "\($0.rawValue) \(report.refusals[$0])" })")
}

@Test func concurrentRekeysConvergeOnOneEpoch() async {
    var s = SessionScenario()
    s.members = 6
    s.seed = 12
    s.rate = 2
    s.sendFor = 4
    s.settleFor = 8
    s.epochChanges = [(by: 1, at: 4.0, remove: nil), (by: 4, at: 4.0, remove: nil), (by: 2, at: 4.0005, remove: 3)]
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    // Three changes on the same parent: one wins; the removal, if it lost, is re-issued on top.
    #expect(report.removed == [3])
    #expect(Set(report.epochHeads.values).count == 1, "one head: \(report.epochs)")
    #expect(report.violations.isEmpty, "\(report.violations.prefix(3))")
}

@Test func aRemovalDuringAPartitionReachesTheCutOffSideAfterTheHeal() async {
    var s = SessionScenario()
    s.members = 8
    s.seed = 13
    s.rate = 2
    s.sendFor = 6
    s.settleFor = 40
    // Members 6 and 7 are cut off from 4 s to 14 s; member 0 removes member 2 meanwhile, then rotates again.
    s.partition = (Set([6, 7]), 4.0, 14.0)
    s.epochChanges = [(by: 0, at: 6.0, remove: 2), (by: 1, at: 8.0, remove: nil)]
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    expectOneEpoch(report, 2, "removal during a partition")
    #expect(report.removed == [2])
    #expect(report.survivors.count == 7)
}
