import HuddleControl
import HuddleCore

/// The node's numbered event stream: every event gets the next cursor, is encoded once as a frame
/// (`EventFrame`: a `message` with its body raw, any other event as its JSON line) kept for replay
/// in `EventSpool` (the last `retainCount` events or more, as long as they take at most
/// `retainBytes`; never more than `spoolLimit` bytes or `indexLimit` events), and goes to each
/// subscriber that asked for its topic: as the frames themselves to a binary subscriber, as JSON
/// lines made from them to the others. Subscribers that keep up are fed from the spool's tail in
/// memory, in batches of up to `pushBytes` (one write on their connection); subscribers at the same
/// cursor with the same topics and encoding share one batch (read, and made into lines, once).
///
/// A subscriber is a cursor into the log: it is sent the lines after its cursor, at most `window`
/// bytes queued on its connection at a time, and is fed again when its writer takes them. Its
/// backlog therefore costs the node at most about `window` (plus the batch being written), however
/// far it lags. A subscriber that falls behind (`overflows`) gets one `overflow` event and is
/// dropped; the event names the cursor to resume from, and every event after that cursor is still
/// retained when it is sent, with a quarter of retention to spare for the resubscription. That
/// resume is then held: retention keeps the events after it, past its usual bounds (up to
/// `holdBytes` on disk), since a slow client sees the `overflow` only after reading what was
/// queued before it; a subscription from it or an older cursor takes the hold over and keeps it at
/// its own cursor while it catches up, until it overflows again or ends. Only a subscriber that
/// started closer to eviction than that, or that lets held retention reach `holdBytes`, can lose
/// events; its `overflow` then names the oldest retained cursor, after the last one it was sent, so
/// the client sees the gap. The node never waits for a subscriber.
///
/// Memory: the spool's tail, the index (8 bytes per retained event) and `window` per subscriber.
struct EventLog {
    typealias Topic = ControlTopic

    /// Retention and subscriber bounds: `standard` in the node, smaller in tests.
    struct Limits {
        /// CONTROL.md: the node retains at least the last 10,000 events or 64 MiB.
        var retainCount = 10_000
        var retainBytes = 64 << 20
        /// Retained bytes and events are never more than these (the spool is on disk, the index in memory).
        var spoolLimit = 256 << 20
        var indexLimit = 1 << 20
        /// Retained bytes while an overflow's resume is held (on disk): at 100 MB/s of event lines
        /// (16 KiB messages), 2.7 s more for the client to reach its `overflow` and resubscribe.
        var holdBytes = 512 << 20
        /// Most resumes held at once (the oldest is let go first).
        var heldLimit = 16
        /// Most bytes of lines queued on one subscriber's connection at once.
        var window = 1 << 20
        /// Most bytes of one batch (one push) to a binary subscriber; a batch of JSON lines is made
        /// from half as many bytes of frames (its lines are up to about 2.5 times their frames).
        var pushBytes = 256 << 10
        /// The spool's write size and segment file size.
        var flushBytes = 256 << 10
        var segmentBytes = 8 << 20

        static let standard = Limits()
    }

    struct Subscriber {
        let connection: ControlConnection
        /// Bit `Self.bit(topic)` set for each topic it takes.
        let topics: UInt8
        /// The cursor of the next event to look at for it.
        var next: Int64
        /// It takes frames (`subscribe {"encoding":"binary"}`), not JSON lines.
        let binary: Bool
        /// How close to eviction it started (`risk` of a `since` replay's backlog): a resubscription
        /// from an overflow's `resume` starts as far behind as it overflowed, and must be let
        /// catch up (`overflowRisk`).
        var startRisk: Double = 0
        /// It resubscribed from a held resume: retention keeps its next event as it kept the resume.
        var holds = false
        /// Bytes of the spool's files read for it off the actor (`loadFromFiles`): from `start` on.
        var loaded: (start: Int64, bytes: [UInt8])?
        /// A read of the files for it is under way: it is fed once it is in (`loaded(_:range:_:)`).
        var loading = false
    }

    /// A read of the spool's files for a subscriber (a `since` replay, a lagging subscriber): `read`
    /// runs on the spool's I/O queue (`NodeIO`), never on the node's actor.
    struct FileLoad: Sendable {
        let range: Range<Int64>
        let read: @Sendable () async -> [UInt8]?
    }

    /// What reading a subscriber's next batch found.
    private enum BatchRead {
        case made([UInt8])
        /// The spool could not read them (they are not retained, or not frames).
        case unreadable
        /// They are in the spool's files: to be read off the actor first.
        case load(Range<Int64>)
    }

    let limits: Limits

    private(set) var latest: Int64 = 0
    /// The cursor of the oldest retained event.
    private(set) var first: Int64 = 1
    /// Per retained event (from `first`, starting at `indexHead`): its offset in the spool << 8 | its topic bit.
    private var index: [UInt64] = []
    private var indexHead = 0
    private var spool: EventSpool
    /// Few (one per subscribed connection): an array updated in place.
    private var subscribers: [Subscriber] = []
    /// Subscribers dropped with an `overflow` event, since the start.
    private(set) var overflows = 0
    /// While set, subscribers are not fed per event: `endDeferring()` feeds each once.
    private var deferring = false
    /// The resumes of overflows sent whose clients have not resubscribed yet: the events after
    /// each are kept while retention stays within `holdBytes`.
    private var held: [Int64] = []
    /// With a data directory (CONTROL.md, Restart): the cursor up to which events are committed
    /// to the node's state (`NodeStateStore`). Subscribers are sent committed events only, so no
    /// cursor a client saw can be numbered again after a crash. Nil without one: every event at once.
    private(set) var durable: Int64?
    /// The last event handed to a commit that has not completed yet (`takeUncommitted`).
    private var taken: Int64?
    /// Called once an event is appended past `durable`, until the next `markDurable`: the node
    /// commits soon (and batches what is appended meanwhile).
    var requestCommit: (@Sendable () -> Void)?
    /// Reads of the spool's files for subscribers, run off the actor: the node hands what was read
    /// to `loaded(_:range:_:)`. Nil (tests of the log alone): the files are read in place.
    var loadFromFiles: (@Sendable (ControlConnection, FileLoad) -> Void)?
    /// An event appended since the last commit was taken asked for one (`requestCommit`).
    private(set) var commitRequested = false
    /// While `feedAll` runs: each batch made, by where it started, the topics and the encoding it
    /// was made for, with the cursor after it (subscribers alike share it, made once).
    private var shared: [SharedKey: (bytes: [UInt8], next: Int64)]?
    private struct SharedKey: Hashable { var from: Int64; var topics: UInt8; var binary: Bool }

    /// The newest event subscribers may be sent.
    private var visible: Int64 { durable ?? latest }

    /// `io`: the queue the spool's files are written and read on.
    init(spoolDirectory: String, limits: Limits = .standard, io: NodeIO = NodeIO()) {
        self.limits = limits
        spool = EventSpool(directory: spoolDirectory, flushBytes: limits.flushBytes, segmentBytes: limits.segmentBytes, io: io)
    }

    /// A wait for the spool's writer when it is behind (`EventSpool.writerWait`), else nil.
    func spoolWriterWait() -> (@Sendable () async -> Void)? { spool.writerWait() }

    /// More than the spool's pending limit waits for its writer (`EventSpool.writerBehind`).
    var spoolWriterBehind: Bool { spool.writerBehind }

    /// The spool's writer finished what it was handed before `spoolWriterWait`.
    mutating func spoolWriterProgressed() { spool.writerProgressed() }

    /// The first error of the spool (a disk that is full), to log once.
    var spoolFailure: String? { spool.failure }

    static func bit(_ topic: Topic) -> UInt8 {
        switch topic {
        case .members: 1
        case .messages: 2
        case .attachments: 4
        case .activity: 8
        case .invite: 16
        case .participants: 32
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
        record(topic) { spool in
            EventFrame.writeJSON(into: &spool) { line in
                line.append(contentsOf: #"{"event":"#.utf8)
                JSON.string(name).write(into: &line)
                line.append(contentsOf: #","cursor":"#.utf8)
                JSON.writeDecimal(UInt64(cursor), into: &line)
                writeFields(&line)
                line.append(UInt8(ascii: "}"))
                line.append(0x0A)
            }
        }
    }

    /// Appends a `message` event (the hot path): its frame is written once, straight into the spool.
    mutating func appendMessage(_ m: WireMessage, reliable: Bool) {
        let cursor = latest + 1
        record(.messages) { MessageEvent.writeFrame(m, reliable: reliable, cursor: cursor, into: &$0) }
    }

    private mutating func record(_ topic: Topic, _ write: (inout [UInt8]) -> Void) {
        let offset = spool.end
        spool.append(write)
        latest += 1
        index.append(UInt64(offset) << 8 | UInt64(Self.bit(topic)))
        evict()
        if durable != nil {
            if !commitRequested {
                commitRequested = true
                requestCommit?()
            }
        } else if !deferring {
            feedAll()
        }
    }

    // MARK: durability (CONTROL.md, Restart)

    /// Turns durability on: events are shown once committed (`markDurable`).
    mutating func makeDurable() {
        durable = latest
        keepUncommitted()
    }

    /// The spool keeps the events not yet handed to a commit in memory (`EventSpool.keep(from:)`).
    /// (Keeping those of the commit in flight too, for subscribers, was tried: no throughput gain —
    /// the `pread` calls seen were SQLite's.)
    private mutating func keepUncommitted() {
        guard let durable else { return spool.keep(from: .max) }
        spool.keep(from: offset(max(max(durable, taken ?? durable) &+ 1, first)))
    }

    /// The events appended since the last commit (still retained), for one batch: what is in
    /// memory is copied now, what is only in the spool's files is read later, on the spool's I/O
    /// queue (`UncommittedEvents.frames()`), never on the caller's thread. Nil when there are none.
    func uncommitted() -> UncommittedEvents? {
        guard let durable else { return nil }
        let committed = max(durable, taken ?? durable)
        guard committed < latest else { return nil }
        var from = max(committed &+ 1, first)
        // What the spool lost (a full disk) is not in the batch: it starts after it.
        while from <= latest && offset(from) < spool.readableStart { from += 1 }
        guard from <= latest else { return nil }
        let start = offset(from), end = offset(latest &+ 1)
        let memoryFrom = min(max(start, spool.memoryStart), end)
        // In memory: no file is read here, and the written tails are shared, not copied. Lost
        // meanwhile: taken by a later commit instead.
        guard let memory = spool.memoryPieces(memoryFrom..<end) else { return nil }
        var topics: [UInt8] = [], bounds: [Int64] = []
        topics.reserveCapacity(Int(latest - from) + 1)
        bounds.reserveCapacity(Int(latest - from) + 2)
        for cursor in from...latest {
            topics.append(topicBit(cursor))
            bounds.append(offset(cursor))
        }
        bounds.append(end)
        let load = memoryFrom > start ? spool.fileLoader(start..<memoryFrom) : nil
        return UncommittedEvents(first: from, topics: topics, bounds: bounds, memoryFrom: memoryFrom, memory: memory, load: load)
    }

    /// `uncommitted()`, handed to a commit: the next one starts after it, and an event appended
    /// from now on asks for another commit (`requestCommit`).
    mutating func takeUncommitted() -> UncommittedEvents? {
        let events = uncommitted()
        if let events { taken = events.last }
        commitRequested = false
        keepUncommitted()
        return events
    }

    /// Every event through `cursor` is committed: subscribers are sent them.
    mutating func markDurable(through cursor: Int64) {
        durable = min(cursor, latest)
        if let taken, taken <= cursor { self.taken = nil }
        feedAll()
    }

    /// Takes up the events a previous run committed (`events`, consecutive, the last one at
    /// `lastCursor`): cursors continue after `lastCursor`, and a `since` from before the restart
    /// replays what is retained. Called once, on a new log, before any event.
    mutating func restore(_ events: [NodeStateStore.StoredEvent], lastCursor: Int64) {
        precondition(latest == 0 && index.isEmpty, "restore on a log in use")
        // Cursors from the state file (checksummed, but any Int64): never past what a count can reach.
        let last = min(max(lastCursor, events.last?.cursor ?? 0), Int64.max / 2)
        // Only a consecutive run ending at `last` can be replayed as it was numbered.
        var run = events[...]
        if let broken = events.indices.last(where: { $0 > events.startIndex && events[$0].cursor != events[$0 - 1].cursor &+ 1 }) {
            run = events[broken...]
        }
        if run.last?.cursor != last { run = [] }
        first = run.first?.cursor ?? last &+ 1
        for event in run {
            let offset = spool.end
            spool.append { $0.append(contentsOf: event.frame) }
            index.append(UInt64(offset) << 8 | UInt64(event.topic))
        }
        latest = last
        durable = last
        evict()
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
            let lost = offset(first) < spool.start
            guard risk((count, bytes)) > 1 || lost else { break }
            // A held resume (or a holding subscriber) before `first` needs it: kept within the
            // hold's bounds, else let go (the subscriber then overflows with the gap showing).
            if let oldest = oldestHeld(), oldest < first {
                if !lost && bytes <= Int64(limits.holdBytes) && count <= Int64(limits.indexLimit) { break }
                held.removeAll { $0 < first }
                for i in subscribers.indices where subscribers[i].next <= first { subscribers[i].holds = false }
            }
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

    /// The oldest cursor whose following events are held: a held resume, or the last cursor a
    /// holding subscriber was sent.
    private func oldestHeld() -> Int64? {
        var oldest = held.min()
        for s in subscribers where s.holds { oldest = min(oldest ?? s.next - 1, s.next - 1) }
        return oldest
    }

    /// How far behind the log's end a subscriber whose next event is `next` is.
    private func lag(_ next: Int64) -> (count: Int64, bytes: Int64) {
        next > latest ? (0, 0) : (latest - next + 1, spool.end - offset(next))
    }

    /// How close to eviction an event `lag` events and bytes behind the log's end is: retention
    /// drops it once this passes 1 (past `retainCount` and `retainBytes` both, or past
    /// `spoolLimit` or `indexLimit`).
    private func risk(_ lag: (count: Int64, bytes: Int64)) -> Double {
        let count = Double(lag.count), bytes = Double(lag.bytes)
        return max(min(count / Double(limits.retainCount), bytes / Double(limits.retainBytes)),
                   bytes / Double(limits.spoolLimit), count / Double(limits.indexLimit))
    }

    /// The `risk` at which a subscriber that started at `startRisk` overflows: half of retention
    /// further behind than it started, but no further than three quarters of retention (so its
    /// `resume` keeps a quarter of retention to spare: the slow client still reads its queued
    /// window before it sees the overflow, then reconnects), and always a sixteenth further than
    /// it started, so that a resubscription from `resume` moves on before it can overflow again.
    static func overflowRisk(startRisk: Double) -> Double {
        max(0.5, min(startRisk + 0.5, max(0.75, startRisk + 0.0625)))
    }

    /// Whether subscriber `s` lags so far that retention would soon drop its next event, or
    /// dropped it already.
    private func overflows(_ s: Subscriber) -> Bool {
        guard s.next <= latest else { return false }
        return s.next < first || risk(lag(s.next)) > Self.overflowRisk(startRisk: s.startRisk)
    }

    private mutating func feedAll() {
        shared = subscribers.count > 1 ? [:] : nil
        defer { shared = nil }
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
        let visible = visible
        guard next <= visible, !subscribers[i].loading else { return true }
        let binary = subscribers[i].binary
        if overflows(subscribers[i]) {
            // Resumed from the oldest retained event when retention dropped its next already.
            return overflow(connection, binary: binary, resume: max(next, first) - 1)
        }
        let mask = subscribers[i].topics
        while next <= visible {
            guard connection.outbox.queuedBytes < limits.window else {
                // Fed again when the writer takes what is queued; asked before looking again, so
                // a take in between is never missed.
                connection.armRefill()
                guard connection.outbox.queuedBytes < limits.window else { return true }
                connection.disarmRefill()
                continue
            }
            let key = SharedKey(from: next, topics: mask, binary: binary)
            let batch: [UInt8]
            if let made = shared?[key] {
                batch = made.bytes
                next = made.next
            } else {
                switch makeBatch(from: &next, topics: mask, binary: binary, through: visible, loaded: subscribers[i].loaded) {
                case let .made(made):
                    batch = made
                    shared?[key] = (made, next)
                case .unreadable:
                    // Unreadable retention: the subscriber is told to resume from here.
                    return overflow(connection, binary: binary, resume: next - 1)
                case let .load(range):
                    // Fed again once the files are read (off the actor).
                    subscribers[i].loading = true
                    loadFromFiles?(connection, FileLoad(range: range, read: spool.fileLoader(range)))
                    return true
                }
            }
            if !batch.isEmpty { connection.outbox.push(batch, bytes: batch.count) }
        }
        return true
    }

    /// The next batch for a subscriber to `topics` whose next event is `next` (moved past it): up to
    /// `pushBytes` of the spool's frames of its topics through `through`, as they are (binary) or
    /// as JSON lines. Bytes in the spool's files come from `loaded` (read off the actor); when they
    /// are not there, the batch ends before them, or (when it is empty) asks for them to be loaded.
    private func makeBatch(from next: inout Int64, topics mask: UInt8, binary: Bool, through visible: Int64,
                           loaded: (start: Int64, bytes: [UInt8])?) -> BatchRead {
        var frames: [UInt8] = []
        // Lines are up to about 2.5 times their frames (a body in base64 and as text): half the
        // frames for them keeps a batch, and what a subscriber queues, near `pushBytes`.
        let budget = binary ? limits.pushBytes : max(limits.pushBytes / 2, 1)
        // Runs of consecutive events of its topics, read in one piece each.
        while next <= visible && frames.count < budget {
            guard topicBit(next) & mask != 0 else { next += 1; continue }
            let runStart = offset(next), runFirst = next
            while next <= visible && topicBit(next) & mask != 0 && frames.count + Int(offset(next) - runStart) < budget { next += 1 }
            let run = runStart..<offset(next)
            if run.lowerBound < spool.memoryStart, loadFromFiles != nil {
                // From the files: only what was loaded for it, never a read here.
                let inFiles = run.lowerBound..<min(run.upperBound, spool.memoryStart)
                guard let loaded, loaded.start <= inFiles.lowerBound, inFiles.upperBound - loaded.start <= Int64(loaded.bytes.count) else {
                    next = runFirst
                    if !frames.isEmpty { break }
                    return .load(run.lowerBound..<min(spool.memoryStart, max(run.upperBound, run.lowerBound + Int64(limits.pushBytes))))
                }
                frames.append(contentsOf: loaded.bytes[Int(inFiles.lowerBound - loaded.start)..<Int(inFiles.upperBound - loaded.start)])
                if inFiles.upperBound < run.upperBound {
                    guard spool.read(inFiles.upperBound..<run.upperBound, into: &frames) else { return .unreadable }
                }
            } else {
                guard spool.read(run, into: &frames) else { return .unreadable }
            }
        }
        if binary { return .made(frames) }
        // Room for the lines at once (a 256 B message's line is about 2.7 times its frame, a 16 KiB
        // one's 2.3 times): queued batches hold no doubled capacity beyond the bytes they count.
        var lines: [UInt8] = []
        lines.reserveCapacity(frames.count * 3)
        guard frames.withUnsafeBytes({ EventFrame.appendLines(of: $0, into: &lines) }) else { return .unreadable }
        return .made(lines)
    }

    /// The spool's files read for the subscriber on `connection` (nil: they could not be read):
    /// it is fed from them.
    mutating func loaded(_ connection: ControlConnection, range: Range<Int64>, _ bytes: [UInt8]?) {
        guard let i = subscribers.firstIndex(where: { $0.connection === connection }) else { return }
        subscribers[i].loading = false
        guard let bytes, bytes.count == Int(range.upperBound - range.lowerBound) else {
            let s = subscribers.remove(at: i)
            _ = overflow(connection, binary: s.binary, resume: max(s.next, first) - 1)
            return
        }
        subscribers[i].loaded = (range.lowerBound, bytes)
        if !feed(i) { subscribers.remove(at: i) }
    }

    /// Sends `overflow` naming `resume` (a line, or a `json` frame to a binary subscriber), and
    /// holds `resume`; false (the subscriber is to be dropped).
    private mutating func overflow(_ connection: ControlConnection, binary: Bool, resume: Int64) -> Bool {
        overflows += 1
        if resume >= first - 1 {
            if held.count >= limits.heldLimit, let oldest = held.indices.min(by: { held[$0] < held[$1] }) { held.remove(at: oldest) }
            held.append(resume)
        }
        var overflow: [UInt8] = []
        JSON.object(["event": "overflow", "cursor": .int(latest), "resume": .int(resume)]).write(into: &overflow)
        overflow.append(0x0A)
        if binary { overflow = EventFrame.wrap(line: overflow) }
        connection.outbox.push(overflow, bytes: overflow.count)
        return false
    }

    /// Registers `connection` for `topics` from the event after `since` (the oldest retained when
    /// `since` is older; only new events without `since`), and queues what it has missed: as
    /// frames when `binary`, else as JSON lines.
    mutating func subscribe(_ connection: ControlConnection, topics: Set<Topic>, since: Int64?, binary: Bool = false) {
        subscribers.removeAll { $0.connection === connection }
        // A replay from a held resume or older takes over what was held for it.
        let holds = since.map { since in held.contains { $0 >= since } } ?? false
        if let since { held.removeAll { $0 >= since } }
        // `since` is the client's number, any Int64: no `+ 1` on it unless it is below `latest`.
        let next = since.map { $0 >= latest ? latest + 1 : max($0 + 1, first) } ?? latest + 1
        subscribers.append(Subscriber(connection: connection, topics: topics.reduce(0) { $0 | Self.bit($1) }, next: next, binary: binary,
                                      startRisk: risk(lag(next)), holds: holds))
        if !feed(subscribers.count - 1) { subscribers.removeLast() }
    }

    /// Each subscriber's backlog: events not yet sent to it, and how near it is to an overflow
    /// (0 caught up, 1 and above: overflowing). What `diagnose` reports as subscribers behind.
    var subscriberBacklogs: [(events: Int64, risk: Double)] {
        subscribers.map { s in let l = lag(s.next); return (l.count, risk(l)) }
    }

    /// Connections subscribed now.
    var subscriberCount: Int { subscribers.count }

    mutating func unsubscribe(_ connection: ControlConnection) {
        subscribers.removeAll { $0.connection === connection }
        connection.disarmRefill()
    }
}

/// Events taken for a commit (`EventLog.uncommitted()`): the frames held in memory (the spool's
/// pieces, `EventSpool.memoryPieces`), and the read of those only in the spool's files, run on the
/// spool's I/O queue when the commit makes its batches (`frames()`). Sendable: immutable values
/// and a `@Sendable` read.
struct UncommittedEvents: Sendable {
    /// The first event's cursor.
    let first: Int64
    /// Each event's topic bit.
    let topics: [UInt8]
    /// Each event's offset in the spool, and one past the last event's frame.
    let bounds: [Int64]
    /// Where `memory` starts in the spool: the bytes before it are read by `load`.
    let memoryFrom: Int64
    /// The bytes from `memoryFrom` to the last event's end, in consecutive pieces.
    let memory: [ArraySlice<UInt8>]
    /// Reads the spool's bytes from the first event's offset to `memoryFrom` (nil: none needed).
    let load: (@Sendable () async -> [UInt8]?)?

    /// The last event's cursor.
    var last: Int64 { first + Int64(topics.count) - 1 }

    /// The events' frames, ready to be made into batches (`CommitEvents`): the read of the
    /// spool's files runs here, on the spool's queue, off the node's actor; one that fails
    /// (retention dropped them meanwhile) leaves out the events that start before `memoryFrom`.
    /// Nil when no event is left. Nothing is concatenated or copied here.
    func frames() async -> CommitEvents? {
        guard let load else { return framesInMemory() }
        var read: [UInt8] = []
        var skip = 0
        if let loaded = await load(), loaded.count == Int(memoryFrom - bounds[0]) {
            read = loaded
        } else {
            while skip < topics.count && bounds[skip] < memoryFrom { skip += 1 }
        }
        guard skip < topics.count else { return nil }
        return CommitEvents(events: self, from: skip, read: read)
    }

    /// `frames()` when every event is in memory (`load` is nil), at once on the caller's thread.
    func framesInMemory() -> CommitEvents? {
        topics.isEmpty ? nil : CommitEvents(events: self, from: 0, read: [])
    }
}

/// The events of one commit (`UncommittedEvents.frames()`), made into `EventBatch`es of at most
/// `batchBytes` each (or one event, when a single event is larger), consecutive, one at a time as
/// they are iterated: a commit of a large backlog (a node slowed by load commits what piled up
/// meanwhile, in one transaction) holds one batch's copy at a time, not a copy of all of it, and
/// writes one record per batch (`NodeStateStore.commit`). Every event is in exactly one batch, in
/// cursor order. Sendable: immutable values.
struct CommitEvents: Sequence, Sendable {
    /// Most bytes of one batch (topic bytes and frames).
    static let batchBytes = 1 << 20
    let events: UncommittedEvents
    /// The first event (an index into `events`) in a batch.
    let from: Int
    /// The spool's bytes from `events.bounds[0]` to `events.memoryFrom` (empty when none were
    /// needed, or when the events before `memoryFrom` are left out).
    let read: [UInt8]
    /// Where each of `events.memory`'s pieces starts in the spool.
    private let memoryStarts: [Int64]

    init(events: UncommittedEvents, from: Int, read: [UInt8]) {
        self.events = events
        self.from = from
        self.read = read
        var starts: [Int64] = [], at = events.memoryFrom
        for piece in events.memory {
            starts.append(at)
            at += Int64(piece.count)
        }
        memoryStarts = starts
    }

    func makeIterator() -> Iterator { Iterator(of: self) }

    struct Iterator: IteratorProtocol {
        private let source: CommitEvents
        /// The next event (an index into `source.events`) to go in a batch.
        private var at: Int

        init(of source: CommitEvents) {
            self.source = source
            at = source.from
        }

        mutating func next() -> NodeStateStore.EventBatch? {
            let e = source.events
            guard at < e.topics.count else { return nil }
            let start = at
            var size = 0
            // At least one event; then while the next one fits.
            repeat {
                size += 1 + Int(e.bounds[at + 1] - e.bounds[at])
                at += 1
            } while at < e.topics.count && size + 1 + Int(e.bounds[at + 1] - e.bounds[at]) <= CommitEvents.batchBytes
            var data: [UInt8] = []
            data.reserveCapacity(size)
            for i in start..<at {
                data.append(e.topics[i])
                source.appendFrame(i, to: &data)
            }
            return NodeStateStore.EventBatch(first: e.first + Int64(start), last: e.first + Int64(at - 1), data: data)
        }
    }

    /// Event `i`'s frame: from `read` before `memoryFrom`, from the events' `memory` after it.
    private func appendFrame(_ i: Int, to data: inout [UInt8]) {
        let e = events
        let lower = e.bounds[i], upper = e.bounds[i + 1]
        if lower < e.memoryFrom {
            let base = e.bounds[0]
            data.append(contentsOf: read[Int(lower - base)..<Int(Swift.min(upper, e.memoryFrom) - base)])
        }
        guard upper > e.memoryFrom else { return }
        var at = Swift.max(lower, e.memoryFrom)
        // The piece holding `at`: the last that starts at or before it.
        var piece = memoryStarts.lastIndex { $0 <= at } ?? 0
        while at < upper, piece < e.memory.count {
            let bytes = e.memory[piece], pieceStart = memoryStarts[piece]
            let to = Swift.min(upper, pieceStart + Int64(bytes.count))
            data.append(contentsOf: bytes[(bytes.startIndex + Int(at - pieceStart))..<(bytes.startIndex + Int(to - pieceStart))])
            at = to
            piece += 1
        }
    }
}
