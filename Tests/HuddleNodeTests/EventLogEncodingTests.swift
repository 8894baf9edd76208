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
        WireMessage(from: MemberID(raw: 0xAA), counter: n, seq: n, deps: [.init(member: MemberID(raw: 0xBB), seq: n)], to: nil, body: body)
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
}
