import HuddleControl
import HuddleCore

/// The node's numbered event stream: every event gets the next cursor, its line is kept for replay
/// in `EventSpool` (the last `retainCount` events or more, as long as they take at most
/// `retainBytes`; never more than `spoolLimit` bytes or `indexLimit` events), and goes to each
/// subscriber that asked for its topic.
///
/// A subscriber is a cursor into the log: it is sent the lines after its cursor, at most `window`
/// bytes queued on its connection at a time, and is fed again when its writer takes them. Its
/// backlog therefore costs the node at most about `window` (plus the batch being written), however
/// far it lags; a subscriber that falls behind by more than half the retained log (`overflows`) gets one
/// `overflow` event naming the cursor to resume from, which is still retained, and is dropped.
/// The node never waits for a subscriber.
///
/// Memory: the spool's tail, the index (8 bytes per retained event) and `window` per subscriber.
struct EventLog {
    typealias Topic = ControlTopic

    struct Subscriber {
        let connection: ControlConnection
        /// Bit `Self.bit(topic)` set for each topic it takes.
        let topics: UInt8
        /// The cursor of the next event to look at for it.
        var next: Int64
        /// How far behind it started (a `since` replay): it overflows only when it falls further
        /// behind than that, by `overflows`' bounds — a resubscription from an overflow's
        /// `resume` starts as far behind as it overflowed, and must be let catch up.
        var startLag: (count: Int64, bytes: Int64) = (0, 0)
    }

    /// CONTROL.md: the node retains at least the last 10,000 events or 64 MiB.
    static let retainCount = 10_000
    static let retainBytes = 64 << 20
    /// Retained bytes and events are never more than these (the spool is on disk, the index in memory).
    static let spoolLimit = 256 << 20
    static let indexLimit = 1 << 20
    /// Most bytes of lines queued on one subscriber's connection at once.
    static let window = 1 << 20
    /// Most bytes of lines queued in one push.
    static let pushBytes = 256 << 10

    private(set) var latest: Int64 = 0
    /// The cursor of the oldest retained event.
    private(set) var first: Int64 = 1
    /// Per retained event (from `first`, starting at `indexHead`): its offset in the spool << 8 | its topic bit.
    private var index: [UInt64] = []
    private var indexHead = 0
    private var spool: EventSpool
    /// Few (one per subscribed connection): an array updated in place.
    private var subscribers: [Subscriber] = []
    /// While set, subscribers are not fed per event: `endDeferring()` feeds each once.
    private var deferring = false

    init(spoolDirectory: String) {
        spool = EventSpool(directory: spoolDirectory)
    }

    /// The first error of the spool (a disk that is full), to log once.
    var spoolFailure: String? { spool.failure }

    static func bit(_ topic: Topic) -> UInt8 {
        switch topic {
        case .members: 1
        case .messages: 2
        case .attachments: 4
        case .activity: 8
        case .invite: 16
        }
    }

    /// Starts a burst of events (a read's worth of messages) whose lines go out in one write.
    mutating func beginDeferring() { deferring = true }

    /// Ends the burst: every subscriber is fed once.
    mutating func endDeferring() {
        deferring = false
        feedAll()
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
        let cursor = latest + 1
        record(topic) { line in
            line.append(contentsOf: #"{"event":"#.utf8)
            JSON.string(name).write(into: &line)
            line.append(contentsOf: #","cursor":"#.utf8)
            JSON.writeDecimal(UInt64(cursor), into: &line)
            writeFields(&line)
            line.append(UInt8(ascii: "}"))
            line.append(0x0A)
        }
    }

    /// Appends a `message` event (the hot path): its line is written once, straight into the spool.
    mutating func appendMessage(_ m: WireMessage, reliable: Bool) {
        let cursor = latest + 1
        record(.messages) { MessageEvent.write(m, reliable: reliable, cursor: cursor, into: &$0) }
    }

    private mutating func record(_ topic: Topic, _ write: (inout [UInt8]) -> Void) {
        let offset = spool.end
        spool.append(write)
        latest += 1
        index.append(UInt64(offset) << 8 | UInt64(Self.bit(topic)))
        evict()
        if !deferring { feedAll() }
    }

    private func offset(_ cursor: Int64) -> Int64 {
        cursor > latest ? spool.end : Int64(index[indexHead + Int(cursor - first)] >> 8)
    }

    private func topicBit(_ cursor: Int64) -> UInt8 { UInt8(truncatingIfNeeded: index[indexHead + Int(cursor - first)]) }

    /// Drops the oldest events while more than retention keeps are held (and what a failed spool
    /// write lost).
    private mutating func evict() {
        var count = latest - first + 1
        while count > 0 {
            let bytes = spool.end - offset(first)
            let over = (count > Self.retainCount && bytes > Self.retainBytes) || bytes > Self.spoolLimit || count > Self.indexLimit
            guard over || offset(first) < spool.start else { break }
            first += 1
            indexHead += 1
            count -= 1
        }
        if indexHead > 4096 && indexHead * 2 > index.count {
            index.removeFirst(indexHead)
            indexHead = 0
        }
        spool.drop(before: offset(first))
    }

    /// How far behind the log's end a subscriber whose next event is `next` is.
    private func lag(_ next: Int64) -> (count: Int64, bytes: Int64) {
        next > latest ? (0, 0) : (latest - next + 1, spool.end - offset(next))
    }

    /// Whether subscriber `s` lags so far that retention would soon drop its next event: by half of
    /// each bound more than it started with, so the cursor it is told to resume from is still
    /// retained; or retention dropped it already.
    private func overflows(_ s: Subscriber) -> Bool {
        guard s.next <= latest else { return false }
        if s.next < first { return true }
        let (count, bytes) = lag(s.next)
        let c = count - s.startLag.count, b = bytes - s.startLag.bytes
        return (c > Int64(Self.retainCount / 2) && b > Int64(Self.retainBytes / 2)) || b > Int64(Self.spoolLimit / 2) || c > Int64(Self.indexLimit / 2)
    }

    private mutating func feedAll() {
        var i = 0
        while i < subscribers.count {
            if feed(i) { i += 1 } else { subscribers.remove(at: i) }
        }
    }

    /// Feeds the subscriber on `connection` (its writer took what was queued).
    mutating func feed(_ connection: ControlConnection) {
        guard let i = subscribers.firstIndex(where: { $0.connection === connection }) else { return }
        if !feed(i) { subscribers.remove(at: i) }
    }

    /// Queues the lines after subscriber `i`'s cursor up to `window` bytes; false when it overflowed
    /// (and is to be dropped).
    private mutating func feed(_ i: Int) -> Bool {
        let connection = subscribers[i].connection
        var next = subscribers[i].next
        defer { subscribers[i].next = next }
        guard next <= latest else { return true }
        if overflows(subscribers[i]) {
            var overflow: [UInt8] = []
            JSON.object(["event": "overflow", "cursor": .int(latest), "resume": .int(next - 1)]).write(into: &overflow)
            overflow.append(0x0A)
            connection.outbox.push(overflow, bytes: overflow.count)
            return false
        }
        let mask = subscribers[i].topics
        while next <= latest {
            guard connection.outbox.queuedBytes < Self.window else {
                // Fed again when the writer takes what is queued; asked before looking again, so
                // a take in between is never missed.
                connection.armRefill()
                guard connection.outbox.queuedBytes < Self.window else { return true }
                connection.disarmRefill()
                continue
            }
            var lines: [UInt8] = []
            // Runs of consecutive events of its topics, read in one piece each.
            while next <= latest && lines.count < Self.pushBytes {
                guard topicBit(next) & mask != 0 else { next += 1; continue }
                let runStart = offset(next)
                while next <= latest && topicBit(next) & mask != 0 && lines.count + Int(offset(next) - runStart) < Self.pushBytes { next += 1 }
                guard spool.read(runStart..<offset(next), into: &lines) else {
                    // Unreadable retention: the subscriber is told to resume from here.
                    return feedFailed(i, connection: connection, resume: next - 1)
                }
            }
            if !lines.isEmpty { connection.outbox.push(lines, bytes: lines.count) }
        }
        return true
    }

    private func feedFailed(_ i: Int, connection: ControlConnection, resume: Int64) -> Bool {
        var overflow: [UInt8] = []
        JSON.object(["event": "overflow", "cursor": .int(latest), "resume": .int(resume)]).write(into: &overflow)
        overflow.append(0x0A)
        connection.outbox.push(overflow, bytes: overflow.count)
        return false
    }

    /// Registers `connection` for `topics` from the event after `since` (the oldest retained when
    /// `since` is older; only new events without `since`), and queues what it has missed.
    mutating func subscribe(_ connection: ControlConnection, topics: Set<Topic>, since: Int64?) {
        subscribers.removeAll { $0.connection === connection }
        // `since` is the client's number, any Int64: no `+ 1` on it unless it is below `latest`.
        let next = since.map { $0 >= latest ? latest + 1 : max($0 + 1, first) } ?? latest + 1
        subscribers.append(Subscriber(connection: connection, topics: topics.reduce(0) { $0 | Self.bit($1) }, next: next, startLag: lag(next)))
        if !feed(subscribers.count - 1) { subscribers.removeLast() }
    }

    mutating func unsubscribe(_ connection: ControlConnection) {
        subscribers.removeAll { $0.connection === connection }
        connection.disarmRefill()
    }
}
