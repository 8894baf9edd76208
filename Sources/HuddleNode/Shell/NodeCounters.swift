import HuddleCore
import Synchronization

/// Byte and message counters, updated from link, datagram and node code without locks.
final class NodeCounters: Sendable {
    enum Kind: CaseIterable { case gossip, messages, chunks }

    private let sentGossip = Atomic<Int>(0), sentMessages = Atomic<Int>(0), sentChunks = Atomic<Int>(0)
    private let receivedGossip = Atomic<Int>(0), receivedMessages = Atomic<Int>(0), receivedChunks = Atomic<Int>(0)
    /// UDP datagrams (not bytes): SWIM gossip, and unreliable messages (one datagram per recipient).
    /// Received counts every datagram that opened under the session key.
    private let datagramsSentGossip = Atomic<Int>(0), datagramsSentMessages = Atomic<Int>(0)
    private let datagramsReceivedGossip = Atomic<Int>(0), datagramsReceivedMessages = Atomic<Int>(0)
    let messagesSent = Atomic<Int>(0)
    let messagesDelivered = Atomic<Int>(0)
    /// Stored messages sent again to a member that asked for a gap.
    let retransmits = Atomic<Int>(0)
    /// Unreliable messages dropped: sent while the link they were for was backed up
    /// (`ShellNote.unreliableDropped`), or received while the event spool's writer was behind.
    let unreliableDropped = Atomic<Int>(0)
    let chunksServed = Atomic<Int>(0)
    let chunksFetched = Atomic<Int>(0)
    /// Chunks received that matched their manifest hash (before the store's own checks).
    let chunksVerified = Atomic<Int>(0)
    /// Link handshakes, dialed or answered, that failed before the link was up.
    let handshakeFailures = Atomic<Int>(0)
    /// Chunks received that failed their manifest hash.
    let corruptChunks = Atomic<Int>(0)
    /// Messages dropped because their origin signature did not verify.
    let forged = Atomic<Int>(0)
    /// Link frames that failed to decrypt or decode, and datagrams that failed to open or were replays.
    let droppedFrames = Atomic<Int>(0)
    let droppedDatagrams = Atomic<Int>(0)
    /// Times a link's send key, and a link's receive key, moved on (`LinkSealer`, `LinkOpener`).
    let linkRekeysSent = Atomic<Int>(0)
    let linkRekeysReceived = Atomic<Int>(0)
    /// Datagrams the kernel refused to send (a firewall's EPERM, no route, a full send buffer).
    let datagramSendErrors = Atomic<Int>(0)
    /// Inputs the shell refused (link and handshake level); the session core counts its own.
    private let shellRefusals = Mutex(RefusalCounts())

    /// Counts one refusal the shell made; true when it is the first of its reason (log it).
    func refuse(_ reason: Refusal, _ n: Int = 1) -> Bool {
        shellRefusals.withLock { $0.add(reason, n) }
    }

    /// The refusals the shell made, by reason.
    var refusals: RefusalCounts { shellRefusals.withLock { $0 } }

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
    /// One sealed datagram of `bytes` handed to the UDP socket: counts the datagram and its bytes.
    func addDatagramSent(_ kind: Kind, bytes: Int) {
        addSent(kind, bytes)
        if case .gossip = kind { _ = datagramsSentGossip.wrappingAdd(1, ordering: .relaxed) } else { _ = datagramsSentMessages.wrappingAdd(1, ordering: .relaxed) }
    }
    /// One datagram of `bytes` that opened under the session key: counts the datagram and its bytes.
    func addDatagramReceived(_ kind: Kind, bytes: Int) {
        addReceived(kind, bytes)
        if case .gossip = kind { _ = datagramsReceivedGossip.wrappingAdd(1, ordering: .relaxed) } else { _ = datagramsReceivedMessages.wrappingAdd(1, ordering: .relaxed) }
    }
    /// Datagrams of `kind` sent or received (`.chunks` never travel as datagrams: 0).
    func datagramsSent(_ kind: Kind) -> Int {
        switch kind {
        case .gossip: datagramsSentGossip.load(ordering: .relaxed)
        case .messages: datagramsSentMessages.load(ordering: .relaxed)
        case .chunks: 0
        }
    }
    func datagramsReceived(_ kind: Kind) -> Int {
        switch kind {
        case .gossip: datagramsReceivedGossip.load(ordering: .relaxed)
        case .messages: datagramsReceivedMessages.load(ordering: .relaxed)
        case .chunks: 0
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
