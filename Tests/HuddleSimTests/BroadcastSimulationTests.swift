import HuddleTestSupport
import HuddleCore
import Testing
@testable import HuddleSim

private func expectClean(_ report: BroadcastReport, _ label: String) {
    let problems = report.violations
    #expect(problems.isEmpty, "\(label): \(problems.count) violations, e.g. \(problems.prefix(3))")
    #expect(report.held.allSatisfy { $0 == 0 }, "\(label): hold-back not empty: \(report.held)")
    #expect(report.stored.allSatisfy { $0 == 0 }, "\(label): retransmit buffers not empty: \(report.stored)")
    let deliveries = report.logs.filter(\.stayed).map(\.deliveries.count)
    print("broadcast sim \(label): \(report.sent) sent, deliveries per member \(deliveries.min() ?? 0)–\(deliveries.max() ?? 0), \(report.datagrams) packets")
}

@Test(arguments: [UInt64(1), 2, 3])
func tenMembersWithTwentyPercentLossAndReordering(seed: UInt64) {
    var s = BroadcastScenario()
    s.members = 10
    s.seed = seed
    s.loss = 0.2
    s.jitter = 0.05
    s.sendFor = 3
    expectClean(BroadcastSimulation.run(s), "10 members, 20 % loss, seed \(seed)")
}

@Test func fiftyMembersWithLossAndReplies() async {
    var s = BroadcastScenario()
    s.members = 50
    s.seed = 7
    s.loss = 0.05
    s.rate = 2
    s.sendFor = 3
    s.settleFor = 6
    s.digestInterval = 0.25
    s.replyProbability = 0.02
    expectClean(await offThePool { [s] in BroadcastSimulation.run(s) }, "50 members, 5 % loss")
}

@Test func aPartitionThatHealsLosesNothing() {
    var s = BroadcastScenario()
    s.members = 12
    s.seed = 11
    s.loss = 0.05
    s.sendFor = 6
    s.partition = (Set(0..<5), 1, 4)
    expectClean(BroadcastSimulation.run(s), "partition 5|7 for 3 s")
}

@Test(arguments: [UInt64(21), 22])
func originsThatCrashMidSendAreRepairedFromTheSurvivors(seed: UInt64) {
    var s = BroadcastScenario()
    s.members = 15
    s.seed = seed
    s.loss = 0.1
    s.sendFor = 4
    s.crashes = [(0, 1.0), (3, 2.2), (7, 3.1)]
    let report = BroadcastSimulation.run(s)
    expectClean(report, "3 crashes, seed \(seed)")
    #expect(report.logs.filter { !$0.stayed }.count == 3)
}

@Test func aLateJoinerDeliversEverythingAfterItsBaseline() {
    var s = BroadcastScenario()
    s.members = 8
    s.seed = 5
    s.loss = 0.1
    s.sendFor = 4
    s.lateJoins = [(7, 2.0)]
    let report = BroadcastSimulation.run(s)
    expectClean(report, "late joiner")
    #expect((report.logs.last?.deliveries.count ?? 0) > 0)
}

@Test func theCheckerCatchesDuplicatesGapsLateDependenciesAndLoss() {
    let ok = DeliveryRecord(msg: "a-1", from: "a", seq: 1, deps: [:])
    let dup = DeliveryLog(member: "x", baseline: [:], deliveries: [ok, ok], stayed: true)
    #expect(DeliveryChecker.violations([dup]).contains { $0.contains("twice") })
    let gap = DeliveryLog(member: "x", baseline: [:], deliveries: [DeliveryRecord(msg: "a-2", from: "a", seq: 2, deps: [:])], stayed: true)
    #expect(DeliveryChecker.violations([gap]).contains { $0.contains("where 1 was due") })
    let early = DeliveryLog(member: "x", baseline: [:], deliveries: [DeliveryRecord(msg: "b-1", from: "b", seq: 1, deps: ["a": 1]), ok], stayed: true)
    #expect(DeliveryChecker.violations([early]).contains { $0.contains("dependency") })
    let lost = [DeliveryLog(member: "x", baseline: [:], deliveries: [ok], stayed: true), DeliveryLog(member: "y", baseline: [:], deliveries: [], stayed: true)]
    #expect(DeliveryChecker.violations(lost).contains { $0.contains("never delivered") })
    let fine = [DeliveryLog(member: "x", baseline: [:], deliveries: [ok], stayed: true), DeliveryLog(member: "y", baseline: ["a": 1], deliveries: [], stayed: true)]
    #expect(DeliveryChecker.violations(fine).isEmpty)
}
