import Synchronization
import Testing
@testable import HuddleNode

/// The node's I/O queue (`NodeIO`): work runs in the order it was handed over, one piece at a
/// time, and only there does `isCurrent` hold (what the state's and key file's writes check).
@Suite struct NodeIOTests {
    @Test func workRunsInOrderOnTheQueueOnly() async throws {
        let io = NodeIO(environment: [:])
        #expect(!NodeIO.isCurrent, "a test's task is not the I/O queue")
        let order = Mutex<[Int]>([])
        for i in 0..<50 { io.submit { order.withLock { $0.append(i) } } }
        let onQueue = try await io.run { NodeIO.isCurrent }
        #expect(onQueue)
        #expect(order.withLock { $0 } == Array(0..<50), "what was submitted before ran first, in order")
        #expect(io.blockingRun { NodeIO.isCurrent })
        #expect(io.commitDelay == nil)
    }

    @Test func theTestDelayIsReadWithinBoundsOnly() {
        #expect(NodeIO(environment: [NodeIO.delayVariable: "250"]).commitDelay == .milliseconds(250))
        for text in ["0", "-5", "x", "60001", "99999999999999999999"] {
            #expect(NodeIO(environment: [NodeIO.delayVariable: text]).commitDelay == nil, "\(text)")
        }
    }
}
