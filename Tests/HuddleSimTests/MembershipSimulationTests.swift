import HuddleTestSupport
import HuddleCore
import HuddleSim
import Testing

/// Seeded simulations of the real SWIM instance (issue 3 acceptance); each runs in seconds.
@Suite struct MembershipSimulationTests {
    @Test func hundredMembersWithLossConvergeDetectEveryCrashWithoutFalsePositives() async {
        var s = SimScenario(nodes: 100, seed: 11, duration: 60)
        s.loss = 0.05
        s.crashes = SimScenario.spreadCrashes(count: 5, nodes: 100, from: 15, to: 40, seed: 11)
        let r = await offThePool { [s] in Simulation.run(s) }
        #expect(r.joinConvergence.count == 99)
        #expect((r.joinConvergence.max ?? .infinity) < 5)
        #expect(r.crashes == 5 && r.crashesDetected == 5)
        #expect((r.detection.max ?? .infinity) < 10)
        #expect(r.falsePositives == 0)
        #expect(r.viewsConverged)
        #expect(r.largestDatagram <= SWIMSettings.lan.maxMessageBytes)
    }

    @Test func aHalvesPartitionLongerThanTheSuspicionTimeoutHealsIntoOneView() {
        let n = 60
        var s = SimScenario(nodes: n, seed: 5, duration: 75)
        s.partitions = [SimScenario.halves(nodes: n, start: 10, end: 25, seed: 5)]
        // Longer than the largest suspicion timeout, so each half really declares the other failed.
        #expect(15 > SWIMSuspicion.bounds(members: n, settings: s.settings).max)
        var sim = Simulation(s)
        sim.runUntil(25)
        let split = sim.report(wallSeconds: 0)
        #expect(split.partitionFailures == 2 * (n / 2) * (n / 2))
        #expect(!split.viewsConverged)
        sim.runUntil(75)  // nobody calls join again: re-merge alone must heal it
        let healed = sim.report(wallSeconds: 0)
        #expect(healed.viewsConverged)
        #expect(healed.falsePositives == 0)
    }

    @Test func aMemberPausedForLessThanTheSuspicionTimeoutIsNeverMarkedFailed() {
        let n = 50
        var s = SimScenario(nodes: n, seed: 3, duration: 40)
        let minTimeout = SWIMSuspicion.bounds(members: n, settings: s.settings).min
        s.pauses = [10.0, 18.0, 26.0].enumerated().map { k, at in .init(node: 7 + k * 10, at: at, duration: minTimeout * 0.6) }
        let r = Simulation.run(s)
        #expect(r.falsePositives == 0)
        #expect(r.viewsConverged)
    }

    @Test func aMemberPausedForLongerIsFailedThenComesBackAlive() {
        var s = SimScenario(nodes: 30, seed: 9, duration: 60)
        s.pauses = [.init(node: 4, at: 10, duration: 10)]
        var sim = Simulation(s)
        sim.runUntil(20)
        let id = sim.memberID(of: 4)
        #expect((0..<30).filter { $0 != 4 }.allSatisfy { sim.view(of: $0)[id]?.state == .failed })
        sim.runUntil(60)
        #expect(sim.report(wallSeconds: 0).viewsConverged)
        #expect((0..<30).allSatisfy { sim.view(of: $0)[id]?.state == .alive })
    }

    @Test func gracefulLeavesAreReportedLeftByEveryone() {
        var s = SimScenario(nodes: 30, seed: 4, duration: 30)
        s.loss = 0.02
        s.leaves = [.init(node: 3, at: 12), .init(node: 17, at: 14)]
        let r = Simulation.run(s)
        #expect(r.leftReports == 29 + 28)  // the first leaver is gone before the second leaves
        #expect(r.leftReportedFailed == 0)
        #expect(r.falsePositives == 0)
    }

    @Test func theSameScenarioGivesTheSameRun() {
        var s = SimScenario(nodes: 40, seed: 21, duration: 30)
        s.loss = 0.1
        s.crashes = [.init(node: 5, at: 12)]
        var a = Simulation.run(s), b = Simulation.run(s)
        a.wallSeconds = 0; b.wallSeconds = 0
        #expect(a == b)
        #expect(a.events > 0)
    }

    @Test func prejoinedLargeRunsStartConvergedAndMeasureLateJoins() {
        var s = SimScenario(nodes: 300, seed: 2, duration: 20)
        s.prejoined = true
        s.lateJoins = [5, 7]
        s.measureFrom = 2
        let r = Simulation.run(s)
        #expect(r.joinConvergence.count == 2)
        #expect((r.joinConvergence.max ?? .infinity) < 3)
        #expect(r.viewsConverged && r.falsePositives == 0)
    }
}
