import HuddleCore

/// What one scrape of `/metrics` reports: the node's own counters and its cores' state, read on
/// the node's actor in one go (`Node.metricsSnapshot()`). Totals only: `NodeMetrics` turns them
/// into Prometheus series; nothing here is counted twice.
struct MetricsSnapshot: Sendable {
    var members: [MemberState: Int] = [:]
    var localHealth = 0
    var probes = SWIMProbeCounts()
    var memberEvents: [MemberChange: Int] = [:]
    var links = 0
    var messagesSent = 0, messagesDelivered = 0, messagesRetransmitted = 0, messagesForged = 0
    var holdbackBytes = 0, holdbackMessages = 0
    var messageStoreBytes = 0, chunkStoreBytes = 0, chunkStoreLimitBytes = 0
    var subscribers = 0, overflows = 0
    var chunksServed = 0, chunksFetched = 0, chunksVerified = 0, chunksCorrupt = 0
    var sentBytes: [NodeCounters.Kind: Int] = [:], receivedBytes: [NodeCounters.Kind: Int] = [:]
    var sentDatagrams: [NodeCounters.Kind: Int] = [:], receivedDatagrams: [NodeCounters.Kind: Int] = [:]
    var refusals = RefusalCounts()
    var epoch: UInt64 = 0
    var handshakeFailures = 0, droppedFrames = 0, droppedDatagrams = 0
}

extension Node {
    /// The node's figures now, for a scrape (the same counters `stats` reports).
    func metricsSnapshot() -> MetricsSnapshot {
        var s = MetricsSnapshot()
        for state in [MemberState.alive, .suspect, .failed, .left] { s.members[state] = 0 }
        for member in swim.members.values { s.members[member.state, default: 0] += 1 }
        s.localHealth = swim.awareness.score
        s.probes = swim.probeCounts
        s.memberEvents = memberEvents
        s.links = links.count
        s.messagesSent = counters.messagesSent.load(ordering: .relaxed)
        s.messagesDelivered = counters.messagesDelivered.load(ordering: .relaxed)
        s.messagesRetransmitted = counters.retransmits.load(ordering: .relaxed)
        s.messagesForged = counters.forged.load(ordering: .relaxed)
        s.holdbackBytes = broadcast.heldBytes.values.reduce(0, +)
        s.holdbackMessages = broadcast.heldCount
        s.messageStoreBytes = broadcast.storedBytes
        s.chunkStoreBytes = journal.swarm.storedBytes
        s.chunkStoreLimitBytes = journal.storeLimitBytes
        s.subscribers = events.subscriberCount
        s.overflows = events.overflows
        s.chunksServed = counters.chunksServed.load(ordering: .relaxed)
        s.chunksFetched = counters.chunksFetched.load(ordering: .relaxed)
        s.chunksVerified = counters.chunksVerified.load(ordering: .relaxed)
        s.chunksCorrupt = counters.corruptChunks.load(ordering: .relaxed)
        for kind in NodeCounters.Kind.allCases {
            s.sentBytes[kind] = counters.sent(kind)
            s.receivedBytes[kind] = counters.received(kind)
            s.sentDatagrams[kind] = counters.datagramsSent(kind)
            s.receivedDatagrams[kind] = counters.datagramsReceived(kind)
        }
        s.refusals = core.refusals.adding(counters.refusals)
        s.epoch = core.epoch
        s.handshakeFailures = counters.handshakeFailures.load(ordering: .relaxed)
        s.droppedFrames = counters.droppedFrames.load(ordering: .relaxed)
        s.droppedDatagrams = counters.droppedDatagrams.load(ordering: .relaxed)
        return s
    }
}
