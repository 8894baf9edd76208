@testable import HuddleNode
import Testing

/// With a data directory, `send` waits for the commit in flight once this member has made about
/// `Node.uncommittedSendBytes` of messages not yet committed (at most `uncommittedSendLimit`
/// messages, at least `uncommittedSendFloor`), counted in messages of the size being sent.
@Suite struct SendBackpressureTests {
    @Test func theUncommittedSendsAllowedFollowTheMessageSize() {
        #expect(Node.uncommittedSendsAllowed(size: 256) == Node.uncommittedSendLimit, "small messages: the count bounds them")
        #expect(Node.uncommittedSendsAllowed(size: 0) == Node.uncommittedSendLimit)
        #expect(Node.uncommittedSendsAllowed(size: 16384) == UInt64(Node.uncommittedSendBytes / 16384), "16 KiB: 4 MiB of them")
        #expect(Node.uncommittedSendsAllowed(size: 1 << 20) == Node.uncommittedSendFloor, "very large: the floor")
        for size in [1, 100, 2047, 2048, 2049, 5000, 16384, 65536, 1 << 30, Int.max] {
            let allowed = Node.uncommittedSendsAllowed(size: size)
            #expect(allowed >= Node.uncommittedSendFloor && allowed <= Node.uncommittedSendLimit, "\(size) B: \(allowed)")
            #expect(allowed == Node.uncommittedSendFloor || allowed == Node.uncommittedSendLimit || allowed * UInt64(size) <= UInt64(Node.uncommittedSendBytes),
                    "within the bytes unless at a bound: \(size) B")
        }
    }
}
