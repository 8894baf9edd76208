import CoreMetrics
import NIOCore

/// The hops a message takes through a node, each timed by `huddle_message_hop_seconds{hop=…}`
/// (with `--metrics`), so a wait can be placed: huddle-bench's transfer-latency row reports the
/// median and p99 of each while an attachment transfers (issue 40, item 2).
enum MessageHop: String, CaseIterable, Sendable {
    /// At a receiver: from a link read that brought application messages to the node's actor taking
    /// them (decryption, signature checks off the actor, the wait for the actor).
    case linkRead = "link_read"
    /// At a receiver: from the actor taking a read's messages to a message's delivery (the core's
    /// work; causal holdback for a message that waited for another).
    case core
    /// With a data directory: from a message's delivery here (a sender's own messages included)
    /// to its event being shown to subscribers (the group commit that holds it; CONTROL.md, Restart).
    case commit
    /// A line queued on a control connection (an event, or a reply) until the connection's writer
    /// takes it; per write, the oldest line in it.
    case eventQueue = "event_queue"
    /// At a sender: from `send` making a broadcast to its batch leaving for the links (the flush
    /// and, with a data directory, the commit that must hold it first).
    case sendHold = "send_hold"
    /// A link message queued on a link until the link's writer takes it (behind the write in
    /// flight, which may be chunks); per write, the oldest message in it.
    case linkQueue = "link_queue"

    var help: String {
        switch self {
        case .linkRead: "link read to the node's actor (decryption, signature checks, the actor's queue)"
        case .core: "the actor taking a read's messages to a message's delivery (core work, causal holdback)"
        case .commit: "delivery to the event being shown to subscribers (the data directory's commit)"
        case .eventQueue: "a line queued on a control connection until its writer takes it (oldest line per write)"
        case .sendHold: "send to the broadcast's batch leaving for the links (flush, and the commit with a data directory)"
        case .linkQueue: "a link message queued on a link until its writer takes it (oldest message per write)"
        }
    }
}

/// The times the node's actor keeps to feed `MessageHop.sendHold` and `.commit`: when each of this
/// member's broadcasts was made (`made`, by seq) and each message event appended (`appended`, by
/// cursor), until the batch leaves or the event is shown. Only kept with `--metrics`.
struct HopStamps {
    var made = StampQueue<UInt64>()
    var appended = StampQueue<Int64>()
}

/// When each of a growing run of keys began to wait, until every key up to one is done. At most
/// `limit` are kept (the oldest is dropped), so a commit that never comes holds a bounded table.
struct StampQueue<Key: Comparable> {
    static var limit: Int { 4096 }
    private var stamps = CircularBuffer<(key: Key, at: ContinuousClock.Instant)>(initialCapacity: 16)

    /// `key` began to wait at `time`.
    mutating func add(_ key: Key, at time: ContinuousClock.Instant = .now) {
        if stamps.count >= Self.limit { stamps.removeFirst() }
        stamps.append((key, time))
    }

    /// Every key through `key` is done: each one's wait, to `record`, once.
    mutating func done(through key: Key, record: (Duration) -> Void) {
        let now = ContinuousClock.now
        while let first = stamps.first, first.key <= key {
            record(now - first.at)
            stamps.removeFirst()
        }
    }
}
