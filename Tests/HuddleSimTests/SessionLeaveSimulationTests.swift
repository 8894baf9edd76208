import HuddleTestSupport
import HuddleCore
import Testing
@testable import HuddleSim

/// Issue 35, item 3: the simulator runs a graceful leave as the node does — the hand-off the core
/// plans, a bounded wait for it, `left` gossiped by datagram and over every link, the links closed.
/// The uploader of an attachment leaves before anyone holds all of it: every chunk only it held
/// is pushed to a member that stays, so every survivor ends with the whole attachment, intact; the
/// others see it leave (not fail), and every message is delivered once, in causal order.
@Test func anUploaderThatLeavesAtOnceHandsItsChunksOffAndEverySurvivorGetsTheAttachmentWhole() async {
    var s = SessionScenario()
    s.members = 10
    s.seed = 35
    s.loss = 0.02
    s.rate = 2
    s.sendFor = 6
    s.settleFor = 20
    // 4 MiB at 2 MB/s per link: nobody holds it all when its uploader leaves 0.3 s after adding it.
    s.bandwidth = 2e6
    s.attachment = (2, 2.5, 4 * 1_048_576 + 77)
    s.leaves = [(2, 2.8)]
    let report = await offThePool { [s] in SessionSimulation.run(s) }
    #expect(report.violations.isEmpty, "\(report.violations.prefix(3))")
    #expect(report.survivors.count == 9 && !report.survivors.contains(2))
    #expect(report.handedOffPushed > 0, "the leaver held chunks nobody else did: it must push them")
    #expect(report.handedOff == report.handedOffPushed, "every pushed chunk was held elsewhere before the leaver's wait ended: \(report.handedOff) of \(report.handedOffPushed)")
    #expect(report.survivors.allSatisfy { report.attachmentComplete[$0] != nil && report.attachmentIntact[$0] == true },
            "complete \(report.attachmentComplete), intact \(report.attachmentIntact)")
    #expect(report.honestMembersEvicted == 0, "nobody failed: the leaver left")
    #expect(report.leftSeen >= report.survivors.count, "every survivor saw the leaver leave (\(report.leftSeen))")
    #expect(report.liveViews.values.allSatisfy { $0 == 9 }, "\(report.liveViews)")
    #expect(report.held.allSatisfy { $0 == 0 } && report.stored.allSatisfy { $0 == 0 })
}
