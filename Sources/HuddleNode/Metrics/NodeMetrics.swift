import CoreMetrics
import HuddleCore
import Prometheus
import Synchronization

/// The node's Prometheus series (`huddle run --metrics`), in a registry of its own.
///
/// One source of truth: the counters `stats` reports (`NodeCounters`, the cores' own counts) are
/// read at scrape time (`MetricsSnapshot`) and their growth since the last scrape is added to
/// the Prometheus counters, so nothing is counted twice and no hot path does more than it did.
/// Only the histograms are fed as things happen, through swift-metrics' `Timer`: a probe's ack
/// (once per protocol period, `Node.tick`), a delivery (one clock read and one bucket update, no
/// allocation), and the hops of a message (`MessageHop`: a few clock reads per message or per
/// write). This type only reports; it decides nothing.
final class NodeMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    /// Seconds from a probe's ping to its ack (direct or through a helper).
    let probeRoundTrip: CoreMetrics.Timer
    /// Seconds from the link read that brought the frames that made a message deliverable (the
    /// message's own, or the one that filled the gap it waited on) to its delivery to the control
    /// socket's subscribers: decryption, signature checks, what the reader handled before it,
    /// actor queueing and causal ordering on this node.
    let deliveryLatency: CoreMetrics.Timer
    /// Seconds a message spends in each hop (`MessageHop`), by hop.
    private let hops: [MessageHop: CoreMetrics.Timer]
    /// Seconds each commit of the data directory's state took on the I/O queue (the transaction).
    private let commitSeconds: CoreMetrics.Timer
    private let series: Mutex<Series>

    init() {
        probeRoundTrip = CoreMetrics.Timer(label: "huddle_probe_rtt_seconds", dimensions: [], handler: registry.makeDurationHistogram(
            descriptor: Self.name("huddle_probe_rtt_seconds", "Round trip of SWIM probes answered in time, from the ping to its ack."),
            labels: [], buckets: Self.seconds([0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1])))
        deliveryLatency = CoreMetrics.Timer(label: "huddle_message_delivery_latency_seconds", dimensions: [], handler: registry.makeDurationHistogram(
            descriptor: Self.name("huddle_message_delivery_latency_seconds", "From the arrival of the link frames that made a message deliverable here to its delivery."),
            labels: [], buckets: Self.seconds([0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5])))
        commitSeconds = CoreMetrics.Timer(label: "huddle_commit_seconds", dimensions: [], handler: registry.makeDurationHistogram(
            descriptor: Self.name("huddle_commit_seconds", "Seconds each commit of the data directory's state took on the I/O queue (its SQLite transaction)."),
            labels: [], buckets: Self.seconds(Self.hopBuckets)))
        let registry = registry
        hops = Dictionary(uniqueKeysWithValues: MessageHop.allCases.map { hop in
            (hop, CoreMetrics.Timer(label: "huddle_message_hop_seconds", dimensions: [("hop", hop.rawValue)], handler: registry.makeDurationHistogram(
                descriptor: Self.name("huddle_message_hop_seconds", "Seconds a message spends in one hop through this node (label hop): \(MessageHop.allCases.map { "\($0.rawValue): \($0.help)" }.joined(separator: "; "))."),
                labels: [("hop", hop.rawValue)], buckets: Self.seconds(Self.hopBuckets))))
        })
        series = Mutex(Series(registry))
    }

    /// Bucket bounds of the hop histograms, in seconds: fine below 10 ms, where the targets are.
    static let hopBuckets = [0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002, 0.003, 0.005, 0.007_5, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 1]

    /// Adds one wait of `hop`.
    func record(_ hop: MessageHop, _ duration: Duration) { hops[hop]?.recordNanoseconds(Self.nanoseconds(duration)) }

    /// Adds one commit's time on the I/O queue.
    func commitWritten(_ duration: Duration) { commitSeconds.recordNanoseconds(Self.nanoseconds(duration)) }

    /// `duration` in nanoseconds, within 0 and an hour (a clock that jumped cannot overflow it).
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let seconds = min(max(duration.components.seconds, 0), 3600)
        return seconds * 1_000_000_000 + max(0, duration.components.attoseconds / 1_000_000_000)
    }

    /// Brings every series up to `snapshot`, then renders the registry (Prometheus text format 0.0.4).
    func render(_ snapshot: MetricsSnapshot) -> [UInt8] {
        series.withLock { $0.update(snapshot) }
        return registry.emitToBuffer()
    }

    static func name(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    private static func seconds(_ values: [Double]) -> [Duration] {
        values.map { Duration.nanoseconds(Int64(($0 * 1e9).rounded())) }
    }
}

/// A Prometheus counter that mirrors a running total kept elsewhere: each scrape adds what the
/// total grew by since the last one.
private struct Mirrored {
    let counter: Prometheus.Counter
    var last = 0

    mutating func mirror(_ total: Int) {
        if total > last { counter.increment(by: Int64(total - last)) }
        last = max(last, total)
    }
}

/// Every series read at scrape time, and the totals last mirrored into the counters.
private struct Series {
    let members: [MemberState: Prometheus.Gauge]
    let localHealth, links, holdbackBytes, holdbackMessages, messageStoreBytes, chunkStoreBytes, chunkStoreLimitBytes,
        subscribers, epoch: Prometheus.Gauge
    var probesSent, probesFailed, messagesSent, messagesDelivered, messagesRetransmitted, messagesForged, overflows,
        chunksServed, chunksFetched, chunksVerified, chunksCorrupt, handshakeFailures, droppedFrames, droppedDatagrams: Mirrored
    var memberEvents: [MemberChange: Mirrored]
    var sentBytes, receivedBytes: [NodeCounters.Kind: Mirrored]
    var sentDatagrams, receivedDatagrams: [NodeCounters.Kind: Mirrored]
    var refusals: [Refusal: Mirrored]

    init(_ registry: PrometheusCollectorRegistry) {
        func gauge(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Prometheus.Gauge {
            registry.makeGauge(descriptor: NodeMetrics.name(name, help), labels: labels)
        }
        func counter(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Mirrored {
            Mirrored(counter: registry.makeCounter(descriptor: NodeMetrics.name(name, help), labels: labels))
        }
        func byKind(_ name: String, _ help: String, _ kinds: [NodeCounters.Kind]) -> [NodeCounters.Kind: Mirrored] {
            Dictionary(uniqueKeysWithValues: kinds.map { ($0, counter(name, help, [("kind", "\($0)")])) })
        }
        let states: [MemberState] = [.alive, .suspect, .failed, .left]
        members = Dictionary(uniqueKeysWithValues: states.map { ($0, gauge("huddle_members", "Members in this node's membership table, by state (this node included).", [("state", $0.description)])) })
        localHealth = gauge("huddle_local_health_score", "Lifeguard's local health multiplier: 0 when healthy; probe intervals and timeouts are scaled by score + 1.")
        links = gauge("huddle_links", "Authenticated links up to other members.")
        holdbackBytes = gauge("huddle_holdback_bytes", "Bytes of messages held back here, waiting for the messages they follow.")
        holdbackMessages = gauge("huddle_holdback_messages", "Messages held back here, waiting for the messages they follow.")
        messageStoreBytes = gauge("huddle_message_store_bytes", "Bytes of delivered messages kept until every member has acknowledged them (for repair).")
        chunkStoreBytes = gauge("huddle_chunk_store_bytes", "Bytes of attachment chunks held in this node's store.")
        chunkStoreLimitBytes = gauge("huddle_chunk_store_limit_bytes", "The chunk store's limit (--store-limit).")
        subscribers = gauge("huddle_event_subscribers", "Control-socket connections subscribed to events.")
        epoch = gauge("huddle_epoch", "The session key epoch in use here (0 before any rotation).")
        probesSent = counter("huddle_probes_sent_total", "SWIM probes started by this node (one direct ping each).")
        probesFailed = counter("huddle_probes_failed_total", "SWIM probes with no ack by the end of their protocol period.")
        messagesSent = counter("huddle_messages_sent_total", "Messages sent by this node's clients.")
        messagesDelivered = counter("huddle_messages_delivered_total", "Messages delivered here (reliable and unreliable, own ones included).")
        messagesRetransmitted = counter("huddle_messages_retransmitted_total", "Stored messages sent again to a member that asked for a gap.")
        messagesForged = counter("huddle_messages_forged_total", "Messages or records dropped because their origin signature did not verify.")
        overflows = counter("huddle_event_overflows_total", "Event subscribers dropped with an overflow event for falling behind.")
        chunksServed = counter("huddle_chunks_served_total", "Attachment chunks sent to members that asked for them.")
        chunksFetched = counter("huddle_chunks_fetched_total", "Attachment chunks received, verified and stored.")
        chunksVerified = counter("huddle_chunks_verified_total", "Attachment chunks received that matched their manifest hash.")
        chunksCorrupt = counter("huddle_chunks_corrupt_total", "Attachment chunks that failed their manifest hash (received, or damaged on disk).")
        handshakeFailures = counter("huddle_handshake_failures_total", "Link handshakes (in and out) that failed before the link was up.")
        droppedFrames = counter("huddle_dropped_frames_total", "Link frames that failed to decrypt or decode (the link is closed).")
        droppedDatagrams = counter("huddle_dropped_datagrams_total", "Datagrams that failed to open or were replays.")
        let changes: [MemberChange] = MemberChange.allCases
        memberEvents = Dictionary(uniqueKeysWithValues: changes.map { ($0, counter("huddle_member_events_total", "Member events: joined, suspect (a suspicion), alive (refuted), failed, left, updated, removed.", [("change", $0.rawValue)])) })
        sentBytes = byKind("huddle_sent_bytes_total", "Bytes sent on links and in datagrams, by kind.", [.gossip, .messages, .chunks])
        receivedBytes = byKind("huddle_received_bytes_total", "Bytes received on links and in datagrams that opened, by kind.", [.gossip, .messages, .chunks])
        sentDatagrams = byKind("huddle_sent_datagrams_total", "UDP datagrams sent, by kind.", [.gossip, .messages])
        receivedDatagrams = byKind("huddle_received_datagrams_total", "UDP datagrams received that opened under a session or link key, by kind.", [.gossip, .messages])
        refusals = Dictionary(uniqueKeysWithValues: Refusal.allCases.map { ($0, counter("huddle_refusals_total", "Inputs from peers refused, by reason (as stats.refused).", [("reason", $0.rawValue)])) })
    }

    mutating func update(_ s: MetricsSnapshot) {
        for (state, gauge) in members { gauge.set(Int64(s.members[state] ?? 0)) }
        localHealth.set(Int64(s.localHealth))
        links.set(Int64(s.links))
        holdbackBytes.set(Int64(s.holdbackBytes))
        holdbackMessages.set(Int64(s.holdbackMessages))
        messageStoreBytes.set(Int64(s.messageStoreBytes))
        chunkStoreBytes.set(Int64(s.chunkStoreBytes))
        chunkStoreLimitBytes.set(Int64(clamping: s.chunkStoreLimitBytes))
        subscribers.set(Int64(s.subscribers))
        epoch.set(Int64(clamping: s.epoch))
        probesSent.mirror(s.probes.sent)
        probesFailed.mirror(s.probes.failed)
        messagesSent.mirror(s.messagesSent)
        messagesDelivered.mirror(s.messagesDelivered)
        messagesRetransmitted.mirror(s.messagesRetransmitted)
        messagesForged.mirror(s.messagesForged)
        overflows.mirror(s.overflows)
        chunksServed.mirror(s.chunksServed)
        chunksFetched.mirror(s.chunksFetched)
        chunksVerified.mirror(s.chunksVerified)
        chunksCorrupt.mirror(s.chunksCorrupt)
        handshakeFailures.mirror(s.handshakeFailures)
        droppedFrames.mirror(s.droppedFrames)
        droppedDatagrams.mirror(s.droppedDatagrams)
        for change in memberEvents.keys { memberEvents[change]?.mirror(s.memberEvents[change] ?? 0) }
        for kind in sentBytes.keys { sentBytes[kind]?.mirror(s.sentBytes[kind] ?? 0) }
        for kind in receivedBytes.keys { receivedBytes[kind]?.mirror(s.receivedBytes[kind] ?? 0) }
        for kind in sentDatagrams.keys { sentDatagrams[kind]?.mirror(s.sentDatagrams[kind] ?? 0) }
        for kind in receivedDatagrams.keys { receivedDatagrams[kind]?.mirror(s.receivedDatagrams[kind] ?? 0) }
        for reason in refusals.keys { refusals[reason]?.mirror(s.refusals[reason]) }
    }
}
