import Foundation
import HuddleControl
@testable import HuddleNode
import Synchronization
import Testing

/// Issue 35, item 4: a subscriber whose events are in the spool's files (a `since` replay) is fed
/// from a read made on the spool's I/O queue (`EventLog.FileLoad`), never by a read in the log's
/// own call; what it is sent then is every event, once, in order.
struct EventLogFileLoadTests {
    @Test func aReplayFromTheFilesWaitsForTheOffActorReadThenGetsEveryEvent() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("eventload-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let io = NodeIO(environment: [:])
        var limits = EventLog.Limits()
        limits.flushBytes = 1 << 10
        limits.segmentBytes = 8 << 10
        limits.pushBytes = 2 << 10
        var log = EventLog(spoolDirectory: directory, limits: limits, io: io)
        let loads = Mutex<[EventLog.FileLoad]>([])
        log.loadFromFiles = { _, load in loads.withLock { $0.append(load) } }
        let pad = String(repeating: "x", count: 200)
        var appended = 0
        func appendEvents(_ n: Int) {
            for _ in 0..<n {
                appended += 1
                log.append("note", topic: .messages, ["n": .int(Int64(appended)), "pad": .string(pad)])
            }
        }
        appendEvents(100)
        // The writer has written what it was handed; the next flush finds that out.
        _ = try await io.run { () }
        appendEvents(10)

        let connection = ControlConnection()
        log.subscribe(connection, topics: [.messages], since: 0)
        #expect(loads.withLock { $0.count } == 1, "the replay starts with a read of the files")
        #expect(connection.outbox.queuedBytes == 0, "nothing is read in place")

        var received: [Int64] = []
        func takeAll() {
            while connection.outbox.queuedBytes > 0 {
                let taken = Mutex<[[UInt8]]>([])
                connection.outbox.whenReady { batch in taken.withLock { $0 = batch ?? [] } }
                connection.writerTook()
                let bytes = taken.withLock { $0.flatMap { $0 } }
                for line in bytes.split(separator: 0x0A) {
                    if case let .object(event)? = try? JSON.parse(Array(line)), let n = event["n"]?.intValue { received.append(n) }
                }
                log.feed(connection)
            }
        }
        // Each read is fed when it is in; the subscriber reaches the events in memory.
        var rounds = 0
        while received.last != Int64(appended), rounds < 1000 {
            rounds += 1
            if let load = loads.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                log.loaded(connection, range: load.range, await load.read())
            }
            takeAll()
        }
        #expect(received == (1...Int64(appended)).map { $0 }, "every event once, in order (\(received.count) of \(appended))")
    }

    /// A commit's events (`UncommittedEvents`): the frames in memory were taken as the spool's
    /// pieces, those only in the files are read when the batch is made (off the actor); a read
    /// that fails (retention dropped them) leaves out the events that start in the files.
    @Test func aCommitsEventsFromTheFilesAreReadWhenItsBatchIsMade() async throws {
        let frames: [[UInt8]] = (7...10).map { EventFrame.wrap(line: Array("{\"event\":\"note\",\"cursor\":\($0)}\n".utf8)) }
        let all = frames.flatMap { $0 }
        var bounds: [Int64] = [100]
        for frame in frames { bounds.append(bounds.last! + Int64(frame.count)) }
        let topics: [UInt8] = [2, 1, 2, 8]
        // The files hold the first event and part of the second (a memory start inside an event).
        let split = frames[0].count + 2
        let memoryFrom = 100 + Int64(split)
        // Held in memory as two pieces (`EventSpool.memoryPieces`), the second from inside the third event.
        let split2 = frames[0].count + frames[1].count + 3
        let memory = [all[split..<split2], all[split2...]]
        let reads = Mutex(0)
        let whole = UncommittedEvents(first: 7, topics: topics, bounds: bounds, memoryFrom: memoryFrom, memory: memory,
                                      load: { reads.withLock { $0 += 1 }; return Array(all[..<split]) })
        #expect(reads.withLock { $0 } == 0, "nothing is read before the batch is made")
        let batch = try #require(await whole.batch())
        #expect(reads.withLock { $0 } == 1)
        #expect(batch.first == 7 && batch.last == 10)
        let events = try #require(batch.events())
        #expect(events.map(\.cursor) == [7, 8, 9, 10])
        #expect(events.map(\.frame) == frames && events.map(\.topic) == topics)

        let lost = UncommittedEvents(first: 7, topics: topics, bounds: bounds, memoryFrom: memoryFrom, memory: memory, load: { nil })
        let rest = try #require(await lost.batch())
        #expect(rest.first == 9 && rest.last == 10, "the events that start in the lost files are left out")
        #expect(try #require(rest.events()).map(\.frame) == Array(frames[2...]))
    }
}

extension UncommittedEvents {
    /// The events as one batch (`frames()`, all in one `EventBatch`): what the tests compare; the
    /// node writes the batches one by one (`NodeStateStore.commit`).
    func batch() async -> NodeStateStore.EventBatch? {
        guard let frames = await frames() else { return nil }
        var all: NodeStateStore.EventBatch?
        for batch in frames {
            if all == nil { all = batch } else { all?.last = batch.last; all?.data += batch.data }
        }
        return all
    }
}
