import HuddleCore
import HuddleTestSupport
import Testing
@testable import HuddleSim

/// Issue 36 in the simulator: members behind NATs (`SimNAT`), the world deciding who reaches
/// whom, and the core's relay and hole-punch rules run through the shared shell's ports.

/// A session with `easy` and `hard` NATted members among `members`, all joining through public ones.
private func natScenario(members: Int, easy: Int, hard: Int, seed: UInt64) -> SessionScenario {
    var s = SessionScenario()
    s.members = members
    s.seed = seed
    s.loss = 0.01
    s.rate = 1
    s.replyProbability = 0.002
    s.sendFor = 10
    // Punching is paced (`HolePunch.Settings`: a node dials at most 8 at once, then one per 2 s),
    // so an easy member with many easy peers needs tens of seconds to reach them all directly.
    s.settleFor = 40
    s.natMix(easy: easy, hard: hard)
    return s
}

/// Every survivor sees every other alive, every pair linked, nothing held back or left
/// unacknowledged; every log exactly once in causal order. (Both runs once broke the last two:
/// a NATted member heard of some members only through gossip, after the unknown-origin wait — now
/// a message depending on a member not heard of asks the peer that passed it on
/// (`SessionCore.catchUpMembership`); and the simulator sent digests only over direct links.)
private func expectReached(_ r: SessionReport, _ label: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.violations.isEmpty, "\(label): \(r.violations.count) violations, e.g. \(r.violations.prefix(3))", sourceLocation: sourceLocation)
    #expect(r.stored.allSatisfy { $0 == 0 }, "\(label): stored \(r.stored.reduce(0, +))", sourceLocation: sourceLocation)
    let everyone = r.survivors.count
    #expect(r.liveViews.values.allSatisfy { $0 == everyone }, "\(label): views \(r.liveViews.filter { $0.value != everyone })", sourceLocation: sourceLocation)
    #expect(r.held.allSatisfy { $0 == 0 }, "\(label): held \(r.held.reduce(0, +))", sourceLocation: sourceLocation)
    #expect(r.pathDisagreements == 0, "\(label): \(r.pathDisagreements) pairs whose ends disagree on their path", sourceLocation: sourceLocation)
    // Nothing unlinked at the end, whatever the kinds.
    #expect(r.paths.values.allSatisfy { $0.none == 0 }, "\(label): paths \(r.paths)", sourceLocation: sourceLocation)
    #expect(r.sent > 0 && r.logs.filter(\.stayed).allSatisfy { $0.deliveries.count > r.sent / 2 }, sourceLocation: sourceLocation)
    print("reach sim \(label): \(r.sent) sent; paths \(r.paths.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "; ")); "
          + "\(r.relayedLinksMade) relayed links made, \(r.punchedLinks) punched links, punches \(r.punchSuccesses)/\(r.punchAttempts); "
          + "\(r.linkMessages) link messages, \(r.repairRequests) repair requests, \(r.honestMembersEvicted) failed or left events about members up")
}

/// The paths the NAT lab's matrix asserts (`Tests/hosts/NATMatrix.swift`): public ↔ any direct,
/// easy ↔ easy direct (punched), easy ↔ hard and hard ↔ hard relayed.
private func expectMatrixPaths(_ r: SessionReport, sourceLocation: SourceLocation = #_sourceLocation) {
    for pair in ["public-public", "public-easy", "public-hard", "easy-easy"] {
        #expect((r.paths[pair]?.relayed ?? 0) == 0 && (r.paths[pair]?.direct ?? 0) > 0, "\(pair): \(String(describing: r.paths[pair]))", sourceLocation: sourceLocation)
    }
    for pair in ["easy-hard", "hard-hard"] {
        #expect((r.paths[pair]?.direct ?? 0) == 0 && (r.paths[pair]?.relayed ?? 0) > 0, "\(pair): \(String(describing: r.paths[pair]))", sourceLocation: sourceLocation)
    }
    #expect(r.punchSuccesses > 0 && r.punchedLinks > 0)
}

@Test func thirtyMembersOfWhichEighteenNATtedAllReachEachOtherOnTheLabsPaths() async {
    let s = natScenario(members: 30, easy: 9, hard: 9, seed: 36)
    let clock = ContinuousClock()
    let began = clock.now
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    print("reach sim 30 members (9 easy, 9 hard) took \(clock.now - began)")
    expectReached(report, "30 members, 9 easy, 9 hard")
    #expect(report.survivors.count == 30)
    expectMatrixPaths(report)
}

@Test func aRelayThatCrashesHandsItsPairsToAnotherRelayAndNothingIsLost() async {
    var s = natScenario(members: 16, easy: 4, hard: 6, seed: 35)
    s.settleFor = 30
    // Mid-sending, once the hard pairs are relayed.
    s.relayCrashAt = s.startWindow + 1 + 6
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    expectReached(report, "16 members, 4 easy, 6 hard, the busiest relay crashes")
    #expect(report.survivors.count == 15)
    #expect(report.relayCrashed != nil && report.pairsOnCrashedRelay.count > 0, "relay \(String(describing: report.relayCrashed)) carried \(report.pairsOnCrashedRelay)")
    #expect(report.pairsRelinked == report.pairsOnCrashedRelay.count, "\(report.pairsRelinked) of \(report.pairsOnCrashedRelay) relinked")
    #expect((report.paths["hard-hard"]?.relayed ?? 0) == 15, "\(String(describing: report.paths["hard-hard"]))")
}

/// The world's rule for a NATted member: a datagram or dial from a member it has not sent to does
/// not reach it, and only punches between the kinds the lab lets meet connect.
@Test func theNATModelLetsInOnlyWhatTheLabsRoutersLetIn() {
    let map = SimNATMap(kinds: [.public, .easy, .hard])
    #expect(map.mapped(0, toward: 1) == "10.0.0.0:7400")
    #expect(map.mapped(1, toward: 0) == "172.16.0.1:7400" && map.mapped(1, toward: 2) == "172.16.0.1:7400")
    #expect(map.mapped(2, toward: 0) != map.mapped(2, toward: 1), "a hard NAT maps each destination to its own port")
}
