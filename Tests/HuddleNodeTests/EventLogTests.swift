import Foundation
import HuddleControl
@testable import HuddleNode
import Synchronization
import Testing

/// The event log's subscriber rules, with small limits, a producer and a reader stepped by hand
/// (no sockets, no clock): the reader takes batches from the connection's outbox the way the
/// node's writer does (the refill is called on each take and feeds the log only when armed), and
/// reads a set number of bytes a step. CONTROL.md: a subscriber that falls behind gets `overflow`
/// naming a cursor it may resubscribe from with `since`.
@Suite(.serialized) struct EventLogTests {
    /// Retention of 256 KiB (at least 400 events or 64 KiB), a 2 KiB window, about 1 KiB a line:
    /// the node's proportions (256 MiB, 1 MiB, 38 KiB lines in the bench) scaled down. A client
    /// sees `overflow` only after the lines queued before it (the writer's batch and the window),
    /// so its resume survives if the log grows by less than a quarter of retention meanwhile: here
    /// the slow reader takes 1 KiB a step against 8 KiB produced (the bench: 4 MB/s against
    /// about 140 MB/s, with a 128 times larger share of retention per window).
    static let limits = EventLog.Limits(
        retainCount: 400, retainBytes: 64 << 10, spoolLimit: 256 << 10, indexLimit: 1 << 20,
        holdBytes: 512 << 10, window: 2 << 10, pushBytes: 1 << 10, flushBytes: 4 << 10, segmentBytes: 32 << 10)

    /// One run: `events` message events, `perStep` appended each step; the reader reads
    /// `slowBytes` a step until its first overflow, then resubscribes from each overflow's
    /// `resume` after `reconnectSteps` steps and reads `fastBytes` a step.
    struct Run {
        var events = 800
        var perStep = 8
        var slowBytes = 1 << 10
        var fastBytes = 12 << 10
        var reconnectSteps = 0
    }

    struct Outcome {
        /// How often each cursor 1...events was received.
        var received: [Int]
        /// Each overflow: (last cursor received before it, resume).
        var overflows: [(last: Int64, resume: Int64)] = []
        /// Each resubscription: (since, first cursor it was sent).
        var replays: [(since: Int64, first: Int64)] = []
        /// Message events that did not follow the previous one of the same subscription.
        var skips = 0
    }

    @Test(arguments: [9 << 10, 12 << 10])
    func aResubscriberThatReadsFasterThanTheLogGrowsGetsEveryEventOnce(fastBytes: Int) throws {
        let outcome = try Self.simulate(Run(fastBytes: fastBytes))
        #expect(!outcome.overflows.isEmpty, "the slow reader overflowed")
        #expect(outcome.received.dropFirst().allSatisfy { $0 == 1 }, "every event exactly once: \(Self.summary(outcome))")
    }

    /// The bench's case: the resubscription starts far behind (where it overflowed, plus what the
    /// log grew while it read its queued window) and reads slower than the log grows. Its next
    /// overflow comes while the resume it names is still retained; before, it came only once
    /// retention had dropped that subscriber's next event, and the replay skipped to the oldest
    /// retained event without a word. A reader slower than the log for long enough must lose
    /// events to bounded retention; then its overflow names a resume past the last cursor it was
    /// sent, so the gap shows.
    @Test(arguments: [4 << 10, 6 << 10, 7 << 10])
    func aResubscriberSlowerThanTheLogIsToldToResumeBeforeItsEventsAreDropped(fastBytes: Int) throws {
        let outcome = try Self.simulate(Run(fastBytes: fastBytes))
        try #require(outcome.overflows.count >= 2 && outcome.replays.count == outcome.overflows.count, "\(Self.summary(outcome))")
        #expect(outcome.overflows[1].resume == outcome.overflows[1].last, "\(Self.summary(outcome))")
        for (overflow, replay) in zip(outcome.overflows, outcome.replays) {
            #expect(overflow.resume >= overflow.last, "\(Self.summary(outcome))")
            if overflow.resume == overflow.last {
                #expect(replay.first == replay.since + 1, "a resume is retained when the overflow says nothing was lost: \(Self.summary(outcome))")
            }
        }
        #expect(outcome.skips == 0, "\(Self.summary(outcome))")
        #expect(outcome.received.allSatisfy { $0 <= 1 }, "no event twice: \(Self.summary(outcome))")
    }

    /// A client that takes a while to resubscribe still finds its resume retained: a quarter of
    /// retention (64 KiB, eight steps here) is kept beyond the overflow point.
    @Test(arguments: [1, 3])
    func aResumeStaysRetainedWhileTheClientReconnects(reconnectSteps: Int) throws {
        let outcome = try Self.simulate(Run(fastBytes: 9 << 10, reconnectSteps: reconnectSteps))
        for (since, first) in outcome.replays {
            #expect(first == since + 1, "\(Self.summary(outcome))")
        }
        #expect(outcome.received.dropFirst().allSatisfy { $0 == 1 }, "\(Self.summary(outcome))")
    }

    /// A client that reaches its `overflow` and resubscribes only after the log grew by more than
    /// the quarter of retention to spare (16 steps, 128 KiB here) still finds its resume, because
    /// the overflow holds it; with the hold no larger than retention itself, the same client loses
    /// events (so the hold is what keeps them).
    @Test func aHeldResumeOutlastsALongReconnect() throws {
        let run = Run(fastBytes: 12 << 10, reconnectSteps: 16)
        let held = try Self.simulate(run)
        #expect(!held.overflows.isEmpty)
        #expect(held.received.dropFirst().allSatisfy { $0 == 1 }, "every event exactly once: \(Self.summary(held))")
        var noHold = Self.limits
        noHold.holdBytes = noHold.spoolLimit
        let lost = try Self.simulate(run, limits: noHold)
        #expect(lost.received.dropFirst().contains(0), "without the hold the same client loses events: \(Self.summary(lost))")
    }

    /// A client too slow to resubscribe (its resume dropped meanwhile) and too slow to read loses
    /// events, but never silently: a replay starts at the oldest retained event after its `since`
    /// (the client sees the jump), an overflow names a resume no older than the last cursor sent,
    /// and within one subscription cursors are consecutive.
    @Test func aGapShowsNeverHides() throws {
        let outcome = try Self.simulate(Run(fastBytes: 1 << 10, reconnectSteps: 12))
        #expect(outcome.received.contains(0), "this client does lose events")
        for (last, resume) in outcome.overflows {
            #expect(resume >= last, "\(Self.summary(outcome))")
        }
        for (since, first) in outcome.replays {
            #expect(first > since, "\(Self.summary(outcome))")
        }
        #expect(outcome.skips == 0, "\(Self.summary(outcome))")
        #expect(outcome.received.allSatisfy { $0 <= 1 }, "no event twice: \(Self.summary(outcome))")
    }

    @Test func overflowRiskBounds() {
        #expect(EventLog.overflowRisk(startRisk: 0) == 0.5)
        #expect(EventLog.overflowRisk(startRisk: 0.25) == 0.75)
        #expect(EventLog.overflowRisk(startRisk: 0.5) == 0.75)
        #expect(EventLog.overflowRisk(startRisk: 0.9) == 0.9625)
        for start in stride(from: 0.0, through: 1.0, by: 0.01) {
            #expect(EventLog.overflowRisk(startRisk: start) > start, "a resubscriber always moves on first")
        }
    }

    // MARK: the stepped run

    static func summary(_ o: Outcome) -> String {
        let missing = o.received.indices.dropFirst().filter { o.received[$0] == 0 }
        let twice = o.received.indices.filter { o.received[$0] > 1 }
        return "overflows \(o.overflows.prefix(6)), replays \(o.replays.prefix(6)), skips \(o.skips), missing \(missing.count) (first \(missing.prefix(3))), twice \(twice.count)"
    }

    /// The refill requests of one connection (the action runs on the writer's side).
    final class RefillFlag: Sendable {
        let requested = Mutex(false)
        func take() -> Bool {
            requested.withLock { flag in
                defer { flag = false }
                return flag
            }
        }
    }

    static func simulate(_ run: Run, limits: EventLog.Limits = limits) throws -> Outcome {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("eventlog-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var log = EventLog(spoolDirectory: directory, limits: limits)
        var outcome = Outcome(received: Array(repeating: 0, count: run.events + 1))
        let body = JSON.string(String(repeating: "x", count: 1000))

        var connection = ControlConnection()
        var flag = RefillFlag()
        func connect(since: Int64?) {
            connection = ControlConnection()
            flag = RefillFlag()
            let f = flag
            connection.setRefill { _ in f.requested.withLock { $0 = true } }
            log.subscribe(connection, topics: [.messages], since: since)
        }
        connect(since: nil)

        var inFlight: [UInt8] = []  // taken by the writer, not yet read
        var pending: [UInt8] = []   // read, not yet a whole line
        var last: Int64 = 0
        var fast = false
        var reconnectIn: Int?
        var resumeFrom: Int64 = 0
        var awaitingReplay: Int64?
        var produced = 0
        var idleSteps = 0
        while idleSteps < 50 {
            for _ in 0..<run.perStep where produced < run.events {
                log.append("message", topic: .messages, ["text": body])
                produced += 1
            }
            if let steps = reconnectIn {
                if steps > 0 { reconnectIn = steps - 1; continue }
                reconnectIn = nil
                inFlight = []
                pending = []
                awaitingReplay = resumeFrom
                connect(since: resumeFrom)
            }
            var budget = fast ? run.fastBytes : run.slowBytes
            var readAny = false
            reading: while budget > 0 {
                if inFlight.isEmpty {
                    // The writer's next take, and its refill when armed.
                    guard connection.outbox.queuedBytes > 0 else { break }
                    let taken = Mutex<[[UInt8]]>([])
                    connection.outbox.whenReady { batch in taken.withLock { $0 = batch ?? [] } }
                    connection.writerTook()
                    inFlight = taken.withLock { $0.flatMap { $0 } }
                    if flag.take() { log.feed(connection) }
                }
                let n = min(budget, inFlight.count)
                pending.append(contentsOf: inFlight[..<n])
                inFlight.removeFirst(n)
                budget -= n
                readAny = readAny || n > 0
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = Array(pending[..<newline])
                    pending.removeFirst(newline + 1)
                    let text = String(decoding: line, as: UTF8.self)
                    if text.hasPrefix(#"{"event":"overflow""#) {
                        let resume = Int64(Self.number(after: "\"resume\":", in: text) ?? -1)
                        outcome.overflows.append((last, resume))
                        resumeFrom = resume
                        fast = true
                        reconnectIn = run.reconnectSteps
                        break reading
                    }
                    guard text.hasPrefix(#"{"event":"message""#), let cursor = Self.number(after: "\"cursor\":", in: text) else { continue }
                    if let since = awaitingReplay {
                        outcome.replays.append((since, Int64(cursor)))
                        awaitingReplay = nil
                    } else if last != 0 && Int64(cursor) != last + 1 {
                        outcome.skips += 1
                    }
                    outcome.received[cursor] += 1
                    last = Int64(cursor)
                }
            }
            idleSteps = produced == run.events && !readAny && reconnectIn == nil ? idleSteps + 1 : 0
        }
        return outcome
    }

    static func number(after key: String, in text: String) -> Int? {
        guard let range = text.range(of: key) else { return nil }
        return Int(text[range.upperBound...].prefix { $0.isNumber })
    }
}
