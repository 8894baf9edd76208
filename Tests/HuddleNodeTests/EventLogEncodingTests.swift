import Foundation
import HuddleControl
import HuddleCore
@testable import HuddleNode
import Synchronization
import Testing

/// The event log's encodings and batches: a binary subscriber gets the frames whose lines a
/// JSON-lines subscriber gets; subscribers at the same cursor share one batch (made once); with
/// durability, what is uncommitted is one batch that reads back as the same events.
@Suite struct EventLogEncodingTests {
    private func directory() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("eventenc-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    private func message(_ n: UInt64, body: [UInt8]) -> WireMessage {
        WireMessage(origin: MemberID(raw: 0xAA), counter: n, seq: n, deps: [.init(member: MemberID(raw: 0xBB), seq: n)], to: nil, body: body)
    }

    /// What the connection's writer would take now, as one byte string, and each item apart.
    private func take(_ connection: ControlConnection) -> (bytes: [UInt8], items: [[UInt8]]) {
        let taken = Mutex<[[UInt8]]>([])
        if connection.outbox.queuedBytes > 0 { connection.outbox.whenReady { batch in taken.withLock { $0 = batch ?? [] } } }
        let items = taken.withLock { $0 }
        return (items.flatMap { $0 }, items)
    }

    private func fill(_ log: inout EventLog) {
        for n in 1...50 {
            log.appendMessage(message(UInt64(n), body: n % 2 == 0 ? Array("text \(n)".utf8) : [0xFF, UInt8(n)]), reliable: true)
            if n % 10 == 0 { log.append("activity", topic: .activity, ["activity": .int(Int64(n)), "set_by": .null]) }
        }
    }

    @Test func aBinarySubscriberGetsTheFramesOfTheLinesOthersGet() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var log = EventLog(spoolDirectory: dir)
        let lines = ControlConnection(), frames = ControlConnection()
        log.subscribe(lines, topics: [.messages, .activity], since: nil)
        log.subscribe(frames, topics: [.messages, .activity], since: nil, binary: true)
        log.beginDeferring()
        fill(&log)
        log.endDeferring()
        let text = take(lines).bytes, binary = take(frames).bytes
        var fromFrames: [UInt8] = []
        #expect(binary.withUnsafeBytes { EventFrame.appendLines(of: $0, into: &fromFrames) }, "the binary subscriber got whole frames")
        #expect(!text.isEmpty && fromFrames == text, "the same events, byte for byte once made into lines")
        #expect(binary.count < text.count, "frames carry bodies raw: \(binary.count) against \(text.count) bytes")
        #expect(text.count { $0 == 0x0A } == 55, "every event a line")
        // A replay from a cursor (from the spool, not the live tail) is the same as well.
        let late = ControlConnection(), lateFrames = ControlConnection()
        log.subscribe(late, topics: [.messages, .activity], since: 0)
        log.subscribe(lateFrames, topics: [.messages, .activity], since: 0, binary: true)
        #expect(take(late).bytes == text)
        #expect(take(lateFrames).bytes == binary)
    }

    @Test func subscribersAtTheSameCursorShareOneBatchMadeOnce() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var log = EventLog(spoolDirectory: dir)
        let connections = (0..<3).map { _ in ControlConnection() }
        for c in connections { log.subscribe(c, topics: [.messages, .activity], since: nil) }
        let other = ControlConnection()
        log.subscribe(other, topics: [.messages], since: nil)
        log.beginDeferring()
        fill(&log)
        log.endDeferring()
        let taken = connections.map { take($0).items }
        let storage = taken.map { $0.map { $0.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } } }
        #expect(!storage[0].isEmpty && storage.allSatisfy { $0 == storage[0] }, "one batch's bytes, shared by the three")
        let own = take(other).items.map { $0.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } }
        #expect(Set(own).isDisjoint(with: Set(storage[0])), "another topic set gets a batch of its own")
    }

    @Test func theUncommittedEventsAreOneBatchThatReadsBackTheSame() async throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var log = EventLog(spoolDirectory: dir)
        log.makeDurable()
        let watcher = ControlConnection()
        log.subscribe(watcher, topics: [.messages, .activity], since: nil)
        fill(&log)
        #expect(take(watcher).bytes.isEmpty, "nothing is shown before it is committed")
        let batch = try #require(await log.uncommitted()?.batch())
        #expect(batch.first == 1 && batch.last == 55)
        let events = try #require(batch.events())
        #expect(events.map(\.cursor) == Array(1...55))
        log.markDurable(through: batch.last)
        let shown = take(watcher).bytes
        var fromBatch: [UInt8] = []
        for event in events { #expect(event.frame.withUnsafeBytes { EventFrame.appendLines(of: $0, into: &fromBatch) }) }
        #expect(shown == fromBatch, "the committed batch holds what subscribers were shown")
        // A restart takes the batch up: cursors go on, a replay gives the same lines.
        let dir2 = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir2) }
        var restored = EventLog(spoolDirectory: dir2)
        restored.restore(events, lastCursor: batch.last)
        let replay = ControlConnection()
        restored.subscribe(replay, topics: [.messages, .activity], since: 0)
        #expect(take(replay).bytes == shown)
        #expect(restored.latest == 55)
    }

    /// A large backlog (a node slowed by load commits what piled up meanwhile) is written as
    /// several batches of at most `CommitEvents.batchBytes` each, made one at a time: the two
    /// commits below hold every event exactly once, in order, as it was appended, and a load
    /// reads back the same.
    @Test func aLargeBacklogCommitsInBoundedBatchesWithNothingLostOrRepeated() async throws {
        let dir = try directory(), stateDir = try directory()
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: stateDir)
        }
        var log = EventLog(spoolDirectory: dir)
        log.makeDurable()
        let body = { (n: Int) in (0..<16_000).map { UInt8(truncatingIfNeeded: $0 &+ n) } }
        for n in 1...300 { log.appendMessage(message(UInt64(n), body: body(n)), reliable: true) }
        let first = try #require(await log.takeUncommitted()?.frames())
        for n in 301...400 { log.appendMessage(message(UInt64(n), body: body(n)), reliable: true) }
        let second = try #require(await log.takeUncommitted()?.frames())
        let again = log.takeUncommitted()
        #expect(again?.first == nil, "nothing is taken twice")
        let batches = Array(first) + Array(second)
        #expect(Array(first).count >= 4, "about 4.8 MiB of events: several batches")
        #expect(batches.allSatisfy { $0.data.count <= CommitEvents.batchBytes })
        #expect(batches.map(\.first) == [1] + batches.dropLast().map { $0.last + 1 }, "consecutive")
        var events: [NodeStateStore.StoredEvent] = []
        for batch in batches { events += try #require(batch.events()) }
        #expect(events.map(\.cursor) == Array(1...400))
        let appended = (1...400).map { n in
            var frame: [UInt8] = []
            MessageEvent.writeFrame(message(UInt64(n), body: body(n)), reliable: true, cursor: Int64(n), into: &frame)
            return frame
        }
        #expect(events.map(\.frame) == appended, "each frame as it was appended")
        #expect(events.allSatisfy { $0.topic == EventLog.bit(.messages) })
        let (store, _) = try NodeStateStore.open(directory: stateDir)
        let io = NodeIO()
        defer { io.blockingRun { store.close() } }
        let point = ResumePoint(member: MemberID(raw: 7), incarnation: 1, ownSeq: 0, counter: 0, delivered: [:], baseline: [:], nonApplication: [:], addresses: [], epochs: nil)
        try io.blockingRun {
            try store.commit(events: first, firstRetained: 1, lastCursor: 300, point: point, own: [], ownFrom: 1, parts: [])
            try store.commit(events: second, firstRetained: 1, lastCursor: 400, point: point, own: [], ownFrom: 1, parts: [])
        }
        log.markDurable(through: 400)
        let loaded = try #require(try store.load())
        #expect(loaded.lastCursor == 400)
        #expect(loaded.events.map(\.cursor) == Array(1...400), "every event once, in order")
        #expect(loaded.events.map(\.frame) == appended, "each as it was appended")
    }
}
