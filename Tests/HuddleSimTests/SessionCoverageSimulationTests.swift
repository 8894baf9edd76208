import HuddleTestSupport
import HuddleCore
import Synchronization
import Testing
@testable import HuddleSim

// Issue 35, item 3: what the node does beyond messaging and one attachment, run by the simulator
// on the core the node runs — unreliable sends, activity, attachment removal, a store limit, a
// backlogged link.

/// Unreliable sends among reliable ones, under datagram loss: best effort (some lost, none
/// repaired), never in the reliable logs, and the reliable traffic beside them stays exactly once
/// and in causal order.
@Test func unreliableSendsArriveBestEffortBesideReliableOnesThatStayExactlyOnce() async {
    var s = SessionScenario()
    s.members = 8
    s.seed = 351
    s.loss = 0.1
    s.rate = 4
    s.sendFor = 4
    s.settleFor = 8
    s.unreliableFraction = 0.5
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    #expect(report.violations.isEmpty, "\(report.violations.prefix(3))")
    #expect(report.unreliableSent > 20 && report.sent > 20, "\(report.unreliableSent) unreliable, \(report.sent) reliable")
    let most = report.unreliableSent * (s.members - 1)
    #expect(report.unreliableDelivered > most / 2 && report.unreliableDelivered < most,
            "\(report.unreliableDelivered) of \(most) possible: at 10 % loss most arrive, and not all")
    #expect(report.held.allSatisfy { $0 == 0 } && report.stored.allSatisfy { $0 == 0 })
}

/// Activity sets by several members, one during a crash: every survivor ends on the last value set.
@Test func everySurvivorEndsOnTheLastActivitySet() async {
    var s = SessionScenario()
    s.members = 8
    s.seed = 352
    s.loss = 0.05
    s.sendFor = 4
    s.settleFor = 8
    s.crashes = [(5, 3.0)]
    s.activitySets = [(1, 2.5, #"{"page":1}"#), (3, 3.0, #"{"page":2}"#), (6, 4.5, #"{"page":3}"#)]
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    #expect(report.violations.isEmpty)
    #expect(report.survivors.count == 7)
    #expect(report.survivors.allSatisfy { report.activity[$0] == .some(#"{"page":3}"#) }, "\(report.activity)")
}

/// The uploader removes its attachment while it spreads: at every survivor it ends removed from
/// the journal and gone from the store, however far its transfer had come.
@Test func aRemovedAttachmentEndsGoneFromEveryJournalAndStore() async {
    var s = SessionScenario()
    s.members = 8
    s.seed = 353
    s.sendFor = 4
    s.settleFor = 8
    s.bandwidth = 4e6
    s.attachment = (1, 2.5, 6 * 1_048_576)
    s.attachmentRemovedAt = 3.5
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    #expect(report.violations.isEmpty)
    #expect(report.survivors.allSatisfy { report.attachmentGone[$0] == true }, "\(report.attachmentGone)")
}

/// Six members sending for 3 s, member 0 adding a 4 MiB attachment at 2.5 s.
private func sixMembersWithAnAttachment(seed: UInt64, settleFor: Double) -> SessionScenario {
    var s = SessionScenario()
    s.members = 6
    s.seed = seed
    s.sendFor = 3
    s.settleFor = settleFor
    s.attachment = (0, 2.5, 4 * 1_048_576)
    return s
}

/// A member whose store limit is below the attachment's size stops fetching at the limit (and
/// says so); the others get it whole. On several seeds: whether the uploader's share for that
/// member reached the others used to depend on when ticks fell (`Swarm.takesShare`).
@Test(arguments: [UInt64(354), 356, 357, 358])
func aMemberWithASmallStoreStopsAtItsLimitAndTheOthersGetTheAttachmentWhole(seed: UInt64) async {
    var s = sixMembersWithAnAttachment(seed: seed, settleFor: 8)
    s.storeLimits = [4: 1_048_576]
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    #expect(report.violations.isEmpty)
    #expect(report.stoppedByStore[4] == true && (report.attachmentBytesHeld[4] ?? .max) <= 1_048_576, "\(report.attachmentBytesHeld)")
    #expect(report.attachmentComplete[4] == nil)
    #expect(report.survivors.filter { $0 != 4 }.allSatisfy { report.attachmentComplete[$0] != nil && report.attachmentIntact[$0] == true },
            "complete at \(report.attachmentComplete), intact \(report.attachmentIntact), held \(report.attachmentBytesHeld)")
}

/// A member on a slow line (1 MB/s) fetches an attachment while messages flow: the queues to it
/// pass the backlog limit, so what it asks of them in bulk is refused (`outbox_full`) until they
/// drain, as the node's link does at `LinkBudget.backlogBytes`; it asks again and still gets the
/// attachment whole, and every message exactly once in causal order.
@Test func aMemberOnASlowLineIsRefusedWhileItsQueuesAreBackloggedAndStillGetsEverything() async {
    var s = sixMembersWithAnAttachment(seed: 355, settleFor: 20)
    s.slowLinks = [5: 1e6]
    s.linkBudget.backlogBytes = 256 << 10
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    #expect(report.violations.isEmpty)
    #expect(report.refusals[.outboxFull] > 0, "no request was refused while backlogged: \(report.refusals)")
    #expect(report.survivors.count == 6)
    #expect(report.survivors.allSatisfy { $0 == 0 || (report.attachmentComplete[$0] != nil && report.attachmentIntact[$0] == true) },
            "\(report.attachmentComplete) \(report.attachmentIntact)")
    #expect(report.stored.allSatisfy { $0 == 0 } && report.held.allSatisfy { $0 == 0 }, "stored \(report.stored), held \(report.held)")
}

/// Replies draw at most half a reply per message by default, whatever the size (a mean of 1 or
/// more grows without end), and 1 in 100 deliveries in small sessions as before.
@Test func repliesPerMessageStayBelowOneByDefaultAtEverySize() {
    for members in [2, 20, 51, 100, 1000] {
        let p = SessionScenario.replyProbability(replies: nil, members: members)
        #expect(p <= 0.01 && p * Double(members - 1) <= 0.5, "\(members) members: \(p)")
    }
    #expect(SessionScenario.replyProbability(replies: nil, members: 20) == 0.01)
    #expect(SessionScenario.replyProbability(replies: 2, members: 101) == 0.02)
    #expect(SessionScenario.hundredMembersSixtyNATted.replyProbability * 99 <= 0.5)
}

/// `run(_:progress:)` tells where the run is once per virtual second, in order, and its counts add
/// up to the report's; the run itself is the same as without it.
@Test func progressComesOncePerVirtualSecondAndAddsUpToTheReport() async {
    var s = SessionScenario()
    s.members = 4
    s.seed = 356
    s.sendFor = 3
    s.settleFor = 4
    s.trace = true
    final class Seen: Sendable {
        let progress = Mutex<[SessionSimulation.Progress]>([])
    }
    let seen = Seen()
    let report = await offThePool { [s] in SessionSimulation.run(s) { p in seen.progress.withLock { $0.append(p) } } }
    let progress = seen.progress.withLock { $0 }
    let seconds = progress.map(\.seconds)
    #expect(!seconds.isEmpty && seconds == (1...seconds.count).map(Double.init), "\(seconds)")
    #expect(Double(seconds.count) >= report.virtualSeconds - 1)
    #expect(progress.reduce(0) { $0 + $1.sentInSecond } == progress.last?.sent)
    #expect((progress.last?.sent ?? 0) > 0 && (progress.last?.sent ?? 0) <= report.sent)
    let plain = await offThePool { [s] in SessionSimulation.run(s) }
    #expect(plain.traceDigest == report.traceDigest, "the same run with and without progress")
}
