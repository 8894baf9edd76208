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
    /// At a receiver with a data directory: from a message's delivery to its event being shown to
    /// subscribers (the group commit that holds it; CONTROL.md, Restart).
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
/// member's broadcasts was made (by seq) and each message event appended (by cursor), until the
/// batch leaves or the event is shown. Only kept with `--metrics`; at most `limit` of each (the
/// oldest is dropped), so a commit that never comes holds a bounded table.
struct HopStamps {
    static let limit = 4096
    private var made = CircularBuffer<(seq: UInt64, at: ContinuousClock.Instant)>(initialCapacity: 16)
    private var appended = CircularBuffer<(cursor: Int64, at: ContinuousClock.Instant)>(initialCapacity: 16)

    /// This member made broadcast `seq`.
    mutating func made(seq: UInt64, at time: ContinuousClock.Instant = .now) {
        if made.count >= Self.limit { made.removeFirst() }
        made.append((seq, time))
    }

    /// This member's broadcasts through `seq` left for the links: each one's wait, to `record`.
    mutating func left(through seq: UInt64, record: (Duration) -> Void) {
        let now = ContinuousClock.now
        while let first = made.first, first.seq <= seq {
            record(now - first.at)
            made.removeFirst()
        }
    }

    /// A message event was appended at `cursor` (not yet shown: a commit is to hold it).
    mutating func appended(cursor: Int64, at time: ContinuousClock.Instant = .now) {
        if appended.count >= Self.limit { appended.removeFirst() }
        appended.append((cursor, time))
    }

    /// The events through `cursor` are shown: each message event's wait, to `record`.
    mutating func shown(through cursor: Int64, record: (Duration) -> Void) {
        let now = ContinuousClock.now
        while let first = appended.first, first.cursor <= cursor {
            record(now - first.at)
            appended.removeFirst()
        }
    }
}
