import HuddleControl
import HuddleCore

/// The node's numbered event stream: every event gets the next cursor, is kept for replay
/// (the last 10,000 events, or fewer when they pass 64 MiB), and goes to each live subscriber.
/// A subscriber whose connection falls `subscriberLimit` bytes behind gets one `overflow` event
/// naming the cursor to resume from and is dropped; the node never waits for a subscriber.
struct EventLog {
    typealias Topic = ControlTopic

    /// A retained event: its line, or a message whose line is written only if someone asks for it
    /// (a node whose messages nobody subscribes to never renders them).
    struct Entry {
        enum Body { case line([UInt8]), message(WireMessage, reliable: Bool) }
        let cursor: Int64
        let topic: Topic
        let body: Body
        /// What the entry counts against `retainBytes`.
        let bytes: Int

        var line: [UInt8] {
            switch body {
            case let .line(line): line
            case let .message(m, reliable): MessageEvent.line(m, reliable: reliable, cursor: cursor)
            }
        }
    }

    struct Subscriber {
        let connection: ControlConnection
        var topics: Set<Topic>
        var lastCursor: Int64
        var dropped = false
    }

    static let retainCount = 10_000
    static let retainBytes = 64 << 20
    /// As much as the log retains: lines queued for a subscriber are the retained lines themselves
    /// (shared, not copied), so a backlog up to this size costs little memory of its own, and it
    /// absorbs the burst of deliveries that follows a stall (a sender may have 64 MiB of messages
    /// unacknowledged). A subscriber further behind could not be caught up from retention anyway.
    static let subscriberLimit = retainBytes
    /// Most bytes a subscriber's writer is left unwoken for during a burst.
    static let deferLimit = 256 << 10

    private(set) var latest: Int64 = 0
    private var entries: [Entry] = []
    private var head = 0
    private var retainedBytes = 0
    /// Few (one per subscribed connection): an array updated in place, not a dictionary, which
    /// would copy itself whole when written while it is iterated.
    private var subscribers: [Subscriber] = []

    /// While set, subscribers' writers are not woken per event: `endDeferring()` wakes each once.
    private var deferring = false
    private var deferredWakes: [ControlConnection] = []

    /// Starts a burst of events (a read's worth of messages) whose lines go out in one write.
    mutating func beginDeferring() { deferring = true }

    /// Ends the burst: every subscriber that got events in it is woken once.
    mutating func endDeferring() {
        deferring = false
        for connection in deferredWakes { connection.outbox.wake() }
        deferredWakes.removeAll(keepingCapacity: true)
    }

    /// Appends an event (`fields` without `event`/`cursor`) and fans it out.
    mutating func append(_ name: String, topic: Topic, _ fields: JSONObject) {
        append(name, topic: topic) { line in
            for (key, value) in fields {
                line.append(UInt8(ascii: ","))
                JSON.string(key).write(into: &line)
                line.append(UInt8(ascii: ":"))
                value.write(into: &line)
            }
        }
    }

    /// Appends an event whose fields `writeFields` writes as JSON members, each preceded by a comma.
    mutating func append(_ name: String, topic: Topic, writeFields: (inout [UInt8]) -> Void) {
        latest += 1
        var line: [UInt8] = []
        line.reserveCapacity(256)
        line.append(contentsOf: #"{"event":"#.utf8)
        JSON.string(name).write(into: &line)
        line.append(contentsOf: #","cursor":"#.utf8)
        JSON.writeDecimal(UInt64(latest), into: &line)
        writeFields(&line)
        line.append(UInt8(ascii: "}"))
        line.append(0x0A)
        retain(Entry(cursor: latest, topic: topic, body: .line(line), bytes: line.count))
        fanOut(line, topic: topic)
    }

    /// Appends a `message` event (the hot path): written once if any subscriber takes messages,
    /// else kept unwritten for a later `since` replay.
    mutating func appendMessage(_ m: WireMessage, reliable: Bool) {
        latest += 1
        if subscribers.contains(where: { $0.topics.contains(.messages) }) {
            let line = MessageEvent.line(m, reliable: reliable, cursor: latest)
            retain(Entry(cursor: latest, topic: .messages, body: .line(line), bytes: line.count))
            fanOut(line, topic: .messages)
        } else {
            retain(Entry(cursor: latest, topic: .messages, body: .message(m, reliable: reliable), bytes: MessageEvent.estimatedSize(m)))
        }
    }

    private mutating func retain(_ entry: Entry) {
        entries.append(entry)
        retainedBytes += entry.bytes
        while entries.count - head > Self.retainCount || (retainedBytes > Self.retainBytes && entries.count - head > 1) {
            retainedBytes -= entries[head].bytes
            head += 1
        }
        if head > 4096 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    private mutating func fanOut(_ line: [UInt8], topic: Topic) {
        var overflowed = false
        for i in subscribers.indices where subscribers[i].topics.contains(topic) {
            let connection = subscribers[i].connection
            if connection.outbox.queuedBytes > Self.subscriberLimit {
                var overflow: [UInt8] = []
                JSON.object(["event": "overflow", "cursor": .int(latest), "resume": .int(subscribers[i].lastCursor)]).write(into: &overflow)
                overflow.append(0x0A)
                connection.outbox.push(overflow, bytes: overflow.count)
                subscribers[i].dropped = true
                overflowed = true
                continue
            }
            // A burst is bounded: past `deferLimit` queued bytes the writer is woken at once, so a
            // burst of large events can never pile up to the overflow limit unwritten.
            let holdBack = deferring && connection.outbox.queuedBytes < Self.deferLimit
            connection.outbox.push(line, bytes: line.count, wake: !holdBack)
            if holdBack && !deferredWakes.contains(where: { $0 === connection }) { deferredWakes.append(connection) }
            subscribers[i].lastCursor = latest
        }
        if overflowed { subscribers.removeAll { $0.dropped } }
    }

    /// Registers `connection` for `topics`, first queueing every retained event after `since`.
    mutating func subscribe(_ connection: ControlConnection, topics: Set<Topic>, since: Int64?) {
        if let since {
            for entry in entries[head...] where entry.cursor > since && topics.contains(entry.topic) {
                let line = entry.line
                connection.outbox.push(line, bytes: line.count)
            }
        }
        subscribers.removeAll { $0.connection === connection }
        subscribers.append(Subscriber(connection: connection, topics: topics, lastCursor: latest))
    }

    mutating func unsubscribe(_ connection: ControlConnection) {
        subscribers.removeAll { $0.connection === connection }
    }
}
