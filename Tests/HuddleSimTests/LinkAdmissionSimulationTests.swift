import HuddleTestSupport
import Testing
@testable import HuddleSim

// Issue 35, item 3: link admission's duplicates, run by the simulator on the core the node runs.
// (Pinning and strangers run in the hostile-member scenario, SessionSimulationTests.)

/// Members dial each other at once (`SessionScenario.crossingDials`) — pairs about to link while
/// the session forms, pairs linked for seconds while everyone sends (some over a link the higher
/// member dialed, which the lower one's dial replaces), and a late joiner with members that do
/// not know it yet. Each completed dial is a link of its own, its responder deciding a wire delay
/// after its dialer, so the two links reach the two ends in either order. The core's duplicate
/// rule must pick the same link at both ends every time; every crossed pair ends on one link that
/// both ends hold, and the messages sent meanwhile arrive exactly once and in causal order.
@Test(arguments: [355, 356, 357] as [UInt64])
func crossingDialsEndOnOneLinkBothEndsAgreeOnAndLoseNoMessage(seed: UInt64) async {
    var s = SessionScenario()
    s.members = 8
    s.seed = seed
    s.loss = 0.05
    s.rate = 4
    s.sendFor = 6
    s.settleFor = 10
    s.directedFraction = 0.3
    s.lateJoins = [(7, 4.5)]
    var dials: [(a: Int, b: Int, at: Double)] = []
    // While the session forms (members start within the first second), the higher member first.
    for k in 0..<6 { dials.append((k + 1, k, 1.02 + 0.07 * Double(k))) }
    // Linked pairs while members send: member 0 sponsored the first joiners, whose dial made the link.
    for k in 1..<7 { dials.append((0, k, 2.5 + 0.3 * Double(k))) }
    dials += [(2, 5, 3.1), (6, 3, 3.1), (4, 1, 4.0)]
    // The late joiner and members that have not heard of it.
    dials += [(7, 2, 4.5), (3, 7, 4.5), (7, 5, 4.6)]
    s.crossingDials = dials
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    #expect(report.survivors.count == 8)
    #expect(report.violations.isEmpty, "\(report.violations.prefix(3))")
    #expect(report.directedUndelivered.isEmpty, "\(report.directedUndelivered.prefix(3))")
    #expect(report.held.allSatisfy { $0 == 0 } && report.stored.allSatisfy { $0 == 0 }, "held \(report.held), stored \(report.stored)")
    #expect(report.honestMembersEvicted == 0)
    // The duplicate rule ran, both ways: second links refused, and second links that replaced the first.
    #expect(report.secondLinks > 0, "no crossing dial made a second link")
    #expect(report.duplicateLinksRefused > 0 && report.duplicateLinksReplaced > 0,
            "refused \(report.duplicateLinksRefused), replaced \(report.duplicateLinksReplaced) of \(report.secondLinks) second links")
    // Both ends always keep the same one, and every crossed pair ends on one link held at both ends.
    #expect(report.linkEndsDisagreed == 0, "ends kept different links \(report.linkEndsDisagreed) times")
    #expect(report.linkEndsDifferAtEnd == 0 && report.pairsWithTwoLinksAtEnd == 0 && report.linkTableMismatches == 0,
            "at the end: \(report.linkEndsDifferAtEnd) pairs differ, \(report.pairsWithTwoLinksAtEnd) hold two, \(report.linkTableMismatches) tables differ from their core")
    let pairs = Set(dials.map { min($0.a, $0.b) * s.members + max($0.a, $0.b) }).count
    #expect(report.crossedPairs == pairs && report.crossedPairsLinkedOnce == pairs, "\(report.crossedPairsLinkedOnce) of \(report.crossedPairs) crossed pairs (\(pairs) dialed) end on one link")
    #expect(report.sent > 100, "\(report.sent) sends")
}
