import Foundation
import HuddleControl
@testable import HuddleNode
import Testing

/// The spool's reuse of dropped segments: bytes read back are exactly the bytes appended, however
/// often a segment has been written over, and nothing dropped can be read.
struct EventSpoolTests {
    /// 4 KiB segments, 1 KiB writes, 64 KiB appended while retention keeps the last ~12 KiB: every
    /// segment file is written over many times (two spares are kept). Each appended line is its own
    /// offset in decimal, so a stale byte from an earlier use of a segment would show.
    @Test func bytesReadBackAreTheBytesAppendedAcrossReusedSegments() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var spool = EventSpool(directory: directory, flushBytes: 1 << 10, segmentBytes: 4 << 10)
        var expected: [UInt8] = []
        var reads = 0
        while spool.end < 64 << 10 {
            let line = Array(String(format: "%015lld\n", spool.end).utf8)
            spool.append { $0.append(contentsOf: line) }
            expected.append(contentsOf: line)
            let keepFrom = max(0, spool.end - (12 << 10))
            spool.drop(before: keepFrom)
            // Every retained range reads back exactly, from the files and the tail.
            if spool.end % 1024 < 16 {
                var out: [UInt8] = []
                #expect(spool.read(spool.start..<spool.end, into: &out))
                let same = out.elementsEqual(expected[Int(spool.start)..<Int(spool.end)])
                #expect(same, "the retained bytes \(spool.start)..<\(spool.end) read back differ from those appended")
                reads += 1
            }
        }
        #expect(reads > 40)
        var dropped: [UInt8] = []
        #expect(!spool.read(0..<16, into: &dropped), "a dropped range cannot be read")
        #expect(dropped.isEmpty)
    }
}

/// The spool's writer runs on its I/O queue, not on the caller: while it is held up (a slow disk)
/// every retained byte still reads back (from what waits for it); more than `pendingLimit` waiting
/// is waited for off the caller (`writerWait`), an append never waits for it however far behind it
/// is, and nothing is lost.
struct EventSpoolWriterTests {
    @Test func aHeldUpWriterNeitherBlocksNorLosesAnything() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let io = NodeIO(environment: [:])
        var spool = EventSpool(directory: directory, flushBytes: 1 << 10, segmentBytes: 4 << 10, pendingLimit: 8 << 10, io: io)
        // The queue is held until `go` is signalled (at the latest after 30 s: a test that waited
        // in place where it must not fails instead of hanging).
        let go = DispatchSemaphore(value: 0)
        io.submit { _ = go.wait(timeout: .now() + 30) }
        var expected: [UInt8] = []
        func appendLines(until end: Int64) {
            while spool.end < end {
                let line = Array(String(format: "%015lld\n", spool.end).utf8)
                spool.append { $0.append(contentsOf: line) }
                expected.append(contentsOf: line)
            }
        }
        appendLines(until: 6 << 10)
        var out: [UInt8] = []
        #expect(spool.read(0..<spool.end, into: &out), "what waits for the writer reads back")
        #expect(out.elementsEqual(expected))
        #expect(spool.failure == nil)
        #expect(spool.writerWait() == nil, "within the pending limit nothing waits")
        // Past the pending limit the append returns; whoever makes events is given a wait.
        let appended = ContinuousClock.now
        appendLines(until: 12 << 10)
        #expect(ContinuousClock.now - appended < .seconds(20), "the append did not wait for the held writer")
        #expect(spool.writerBehind)
        let wait = try #require(spool.writerWait())
        Thread.detachNewThread { Thread.sleep(forTimeInterval: 0.2); go.signal() }
        await wait()
        spool.writerProgressed()
        #expect(!spool.writerBehind, "what the writer wrote left memory")
        // Four times the limit behind, with nothing waiting: the append still returns at once
        // (it used to wait for the writer in place, on the node's actor), and says how far past.
        let again = DispatchSemaphore(value: 0)
        io.submit { _ = again.wait(timeout: .now() + 30) }
        let held = ContinuousClock.now
        #expect(spool.overshoot < spool.pendingLimit, "it went past the limit only by the first part's appends")
        appendLines(until: spool.end + Int64(4 * spool.pendingLimit) + (4 << 10))
        #expect(ContinuousClock.now - held < .seconds(20), "the append did not wait for the held writer")
        #expect(spool.overshoot >= 3 * spool.pendingLimit && spool.failure == nil)
        #expect(spool.start == 0, "nothing was lost")
        out = []
        #expect(spool.read(0..<spool.end, into: &out), "what waits for the writer reads back")
        #expect(out.elementsEqual(expected))
        again.signal()
        _ = try await io.run { () }
        out = []
        #expect(spool.read(0..<spool.end, into: &out))
        #expect(out.elementsEqual(expected))
    }

    /// Written tails from `keep(from:)` on stay in memory (a commit is still to read them); once let
    /// go, what is written is read from the files.
    @Test func keptTailsStayInMemoryUntilLetGo() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let io = NodeIO(environment: [:])
        var spool = EventSpool(directory: directory, flushBytes: 1 << 10, segmentBytes: 4 << 10, pendingLimit: 64 << 10, io: io)
        spool.keep(from: 0)
        var expected: [UInt8] = []
        func appendLines(until end: Int64) {
            while spool.end < end {
                let line = Array(String(format: "%015lld\n", spool.end).utf8)
                spool.append { $0.append(contentsOf: line) }
                expected.append(contentsOf: line)
            }
        }
        appendLines(until: 8 << 10)
        _ = try await io.run { () }
        appendLines(until: 9 << 10)
        #expect(spool.memoryStart == 0, "written, but kept")
        spool.keep(from: 6 << 10)
        #expect(spool.memoryStart > 0 && spool.memoryStart <= 6 << 10, "let go up to where it is kept: \(spool.memoryStart)")
        var out: [UInt8] = []
        #expect(spool.read(0..<spool.end, into: &out))
        #expect(out.elementsEqual(expected), "the same bytes, from the files and memory")
    }
}

/// Appending to the spool's tail copies nothing already in it: a commit's copy of the whole tail
/// (`memoryPieces`) does not share its buffer (the next append would copy it whole), and the event
/// frames grow a buffer geometrically (`reserveForAppending`). Before, the 256 B throughput row's
/// sender copied 149 MB a second in `MessageFrame.write`: the tail, once per event, after a commit
/// had shared it.
struct EventSpoolAppendCopyTests {
    @Test func aCommitsCopyOfTheWholeTailLeavesTheTailAppendedInPlace() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var spool = EventSpool(directory: directory, flushBytes: 64 << 10, segmentBytes: 256 << 10)
        spool.append { $0.append(contentsOf: [UInt8](repeating: 7, count: 1000)) }
        let pieces = try #require(spool.memoryPieces(spool.tailStart..<spool.end))
        #expect(pieces.count == 1 && pieces[0].count == 1000)
        let before = spool.tail.withUnsafeBufferPointer { $0.baseAddress }
        spool.append { $0.append(contentsOf: [UInt8](repeating: 8, count: 100)) }
        #expect(spool.tail.withUnsafeBufferPointer { $0.baseAddress } == before, "the append copied the tail: the commit's piece shared it")
        #expect(pieces[0].allSatisfy { $0 == 7 }, "the piece is unchanged by the append")
    }

    @Test func framesAppendedOneByOneGrowTheirBufferGeometrically() {
        var out: [UInt8] = []
        var reallocations = 0
        let body = [UInt8](repeating: 1, count: 256)
        for i in 0..<4000 {
            let capacity = out.capacity
            body.withUnsafeBufferPointer { b in
                MessageFrame.write(cursor: UInt64(i), from: 1, counter: UInt64(i), seq: UInt64(i), reliable: true,
                                   deps: [(UInt64, UInt64)](), to: nil, body: b, into: &out)
            }
            if out.capacity != capacity { reallocations += 1 }
        }
        #expect(reallocations <= 24, "\(reallocations) reallocations for 4000 frames: the buffer grows by exactly what each frame needs")
    }
}
