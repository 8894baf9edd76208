import Synchronization

/// Byte and message counters, updated from link, datagram and node code without locks.
final class NodeCounters: Sendable {
    enum Kind { case gossip, messages, chunks }

    private let sentGossip = Atomic<Int>(0), sentMessages = Atomic<Int>(0), sentChunks = Atomic<Int>(0)
    private let receivedGossip = Atomic<Int>(0), receivedMessages = Atomic<Int>(0), receivedChunks = Atomic<Int>(0)
    let messagesSent = Atomic<Int>(0)
    let messagesDelivered = Atomic<Int>(0)
    /// Stored messages sent again to a member that asked for a gap.
    let retransmits = Atomic<Int>(0)
    let chunksServed = Atomic<Int>(0)
    let chunksFetched = Atomic<Int>(0)
    /// Chunks received that failed their manifest hash.
    let corruptChunks = Atomic<Int>(0)
    /// Messages dropped because their origin signature did not verify.
    let forged = Atomic<Int>(0)
    /// Link frames that failed to decrypt or decode, and datagrams that failed to open or were replays.
    let droppedFrames = Atomic<Int>(0)
    let droppedDatagrams = Atomic<Int>(0)
    /// Datagrams the kernel refused to send (a firewall's EPERM, no route, a full send buffer).
    let datagramSendErrors = Atomic<Int>(0)

    func addSent(_ kind: Kind, _ n: Int) {
        switch kind {
        case .gossip: _ = sentGossip.wrappingAdd(n, ordering: .relaxed)
        case .messages: _ = sentMessages.wrappingAdd(n, ordering: .relaxed)
        case .chunks: _ = sentChunks.wrappingAdd(n, ordering: .relaxed)
        }
    }
    func addReceived(_ kind: Kind, _ n: Int) {
        switch kind {
        case .gossip: _ = receivedGossip.wrappingAdd(n, ordering: .relaxed)
        case .messages: _ = receivedMessages.wrappingAdd(n, ordering: .relaxed)
        case .chunks: _ = receivedChunks.wrappingAdd(n, ordering: .relaxed)
        }
    }
    func sent(_ kind: Kind) -> Int {
        switch kind {
        case .gossip: sentGossip.load(ordering: .relaxed)
        case .messages: sentMessages.load(ordering: .relaxed)
        case .chunks: sentChunks.load(ordering: .relaxed)
        }
    }
    func received(_ kind: Kind) -> Int {
        switch kind {
        case .gossip: receivedGossip.load(ordering: .relaxed)
        case .messages: receivedMessages.load(ordering: .relaxed)
        case .chunks: receivedChunks.load(ordering: .relaxed)
        }
    }
}
