import Testing
@testable import HuddleSim

@Test(arguments: [UInt64(1), 2, 3])
func everyMemberCompletesAndTheUploaderSendsLittleMoreThanOnce(seed: UInt64) {
    var s = SwarmScenario()
    s.seed = seed
    let report = SwarmSimulation.run(s)
    #expect(report.completed == report.fetchers)
    print("swarm sim seed \(seed): \(report.completed)/\(report.fetchers) complete at \(report.completeAt ?? -1) s, uploader sent \(report.uploaderSent) chunks = \(report.uploaderRatio) x")
    #expect(report.uploaderRatio <= 1.2, "the issue target for the uploader")
}

@Test func membersCompleteAfterTheUploaderCrashesOnceReplicated() {
    var s = SwarmScenario()
    s.seed = 9
    s.crashUploaderWhenReplicated = true
    let report = SwarmSimulation.run(s)
    #expect(report.uploaderCrashedAt != nil, "the attachment never became replicated")
    #expect(report.completed == s.members - 1)
    #expect(report.completeAt != nil, "members did not complete after the uploader crashed")
    print("swarm sim uploader crash at \(report.uploaderCrashedAt ?? -1) s: all complete at \(report.completeAt ?? -1) s")
}

@Test func aLateJoinerCompletesFromTheOthersAfterTheUploaderLeft() {
    var s = SwarmScenario()
    s.seed = 4
    s.crashUploaderWhenReplicated = true
    s.lateJoiner = true
    let report = SwarmSimulation.run(s)
    #expect(report.completeAt != nil)
    #expect(report.completed == s.members, "the \(s.members - 1) survivors and the late joiner")
}

@Test func aCorruptServerIsNeverAskedAgainForWhatItCorrupted() {
    var s = SwarmScenario()
    s.seed = 6
    s.corruptServer = 3
    let report = SwarmSimulation.run(s)
    #expect(report.completeAt != nil)
    #expect(report.repeatedBadAsks == 0)
}
