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
        #expect(NodeIO(environment: [NodeIO.readDelayVariable: "40"]).readDelay == .milliseconds(40))
        #expect(NodeIO(environment: [NodeIO.delayVariable: "250"]).readDelay == nil, "each knob is its own")
        for text in ["0", "-5", "x", "60001", "99999999999999999999"] {
            #expect(NodeIO(environment: [NodeIO.delayVariable: text]).commitDelay == nil, "\(text)")
            #expect(NodeIO(environment: [NodeIO.readDelayVariable: text]).readDelay == nil, "\(text)")
        }
    }

    /// `IOThreads`: the I/O queue and the file work pools are the threads file calls may run on;
    /// a checked call anywhere else (a test's task, like the node's actor) is counted.
    @Test func fileCallsOffTheIOThreadsAreCounted() async throws {
        #expect(!IOThreads.isCurrent, "a test's task is no I/O thread")
        #expect(IOThreads.run { IOThreads.isCurrent })
        #expect(!IOThreads.isCurrent, "the mark ends with run")
        let io = NodeIO(environment: [:])
        #expect(try await io.run { IOThreads.isCurrent })
        #expect(try await ChunkIO.run { IOThreads.isCurrent })
        #expect(try await BulkWork.run { IOThreads.isCurrent })
        // Other tests may count calls of their own meanwhile: this one's adds at least one.
        let before = IOThreads.offThreadCalls
        IOThreads.check("a test's call off the I/O threads")
        #expect(IOThreads.offThreadCalls >= before + 1)
        #expect(IOThreads.firstOffThread != nil)
    }
}
