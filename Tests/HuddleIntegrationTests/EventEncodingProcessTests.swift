import Foundation
import HuddleControl
import HuddleTestSupport
import Synchronization
import Testing

/// The event path with real processes: a binary subscription (README, "Binary event frames") carries
/// the same events as JSON lines, message bodies raw on the wire; and with `--data-dir`, a member
/// killed during a burst of messages (events committed a batch at a time) comes back with no event
/// lost or repeated (CONTROL.md, Restart).
@Suite(.timeLimit(.minutes(10)))
struct EventEncodingProcessTests {
    @Test func aBinarySubscriptionCarriesTheSameEventsAsJSONLinesWithBodiesRaw() async throws {
        let cluster = try TestCluster("frames")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let topics: JSON = .array(["members", "messages", "attachments", "activity"].map(JSON.string))
        let lines = try await EventCollector.subscribe(b, topics: ["members", "messages", "attachments", "activity"])
        let framedClient = try await b.client()
        defer { Task { await framedClient.close() } }
        let reply = try await framedClient.ask("subscribe", ["topics": topics, "encoding": "binary"])
        #expect(reply["encoding"] == .string("binary"), "the node says it took the encoding: \(reply.serializedForLog)")
        // Raw, to see the bytes: the reply line, then frames; a body that is not UTF-8 comes as itself.
        let raw = try RawControlConnection(path: b.control)
        let rawReply = try raw.roundTrip(#"{"op":"subscribe","topics":["messages"],"encoding":"binary"}"#)
        #expect(rawReply["encoding"] == .string("binary"))

        let binaryBody: [UInt8] = [0xFF, 0x00, 0x0A, 0x22, 0x5C, 0xC3]
        _ = try await a.request("send", ["text": "plain"])
        _ = try await a.request("send", ["data": .string(Data(binaryBody).base64EncodedString())])
        _ = try await a.request("send", ["text": "quote \" backslash \\ newline \n tab \t é", "to": .array([.string(b.member)])])
        _ = try await a.request("send", ["text": "unreliable", "reliable": false])
        _ = try await b.request("activity.set", ["value": .object(["game": "chess"])])
        try await eventually("b to deliver the four messages and the activity") {
            let events = await lines.events
            return events.count { $0["event"]?.stringValue == "message" } >= 4 && events.contains { $0["event"]?.stringValue == "activity" }
        }
        let latest = try #require(await lines.events.compactMap { $0["cursor"]?.intValue }.max())

        let framedEvents = await framedClient.events()
        var framed: [JSONObject] = []
        for try await event in framedEvents {
            framed.append(event)
            if (event["cursor"]?.intValue ?? 0) >= latest { break }
        }
        try await lines.catchUp()
        let firstFramed = try #require(framed.first?["cursor"]?.intValue)
        let fromLines = await lines.events.filter { ($0["cursor"]?.intValue ?? 0) >= firstFramed }
        #expect(framed.count >= 5, "the messages and the activity event came framed: \(framed.count)")
        #expect(framed == Array(fromLines.prefix(framed.count)), "framed events read as the JSON lines do")
        #expect(framed.contains { $0["event"]?.stringValue == "activity" }, "an event other than message comes as a json frame")
        let sent = framed.first { $0["data"]?.stringValue == Data(binaryBody).base64EncodedString() }
        #expect(sent != nil && sent?["text"] == nil, "a body that is not UTF-8 has no text")

        // The raw connection: every frame's length and kind, and the binary body's bytes as they are.
        var messages = 0
        var sawRawBody = false
        while messages < 3 {
            let (kind, payload) = try raw.frame()
            #expect(kind == EventFrame.message || kind == EventFrame.json)
            guard kind == EventFrame.message else { continue }
            messages += 1
            payload.withUnsafeBytes { bytes in
                guard let m = MessageFrame(bytes) else { Issue.record("a message frame that does not parse"); return }
                if Array(m.body) == binaryBody { sawRawBody = true; #expect(!m.isUTF8) }
            }
        }
        #expect(sawRawBody, "the binary body came raw in its frame")
        // A request after a binary subscribe is answered in a frame.
        try raw.send(#"{"op":"status","id":"after"}"#)
        var answered = false
        for _ in 0..<16 where !answered {
            let (kind, payload) = try raw.frame()
            if kind == EventFrame.json, case let .object(o)? = try? JSON.parse(Array(payload.dropLast())), o["id"] == .string("after") {
                answered = o["ok"] == .bool(true)
            }
        }
        #expect(answered, "the status reply came as a json frame")
        await lines.stop()
    }

    /// A message event as a subscriber read it: its `msg`, and the index of the body sent (the body
    /// was checked byte for byte against `overflowBody(index)`).
    struct ReadMessage: Equatable { var msg: String; var index: Int }

    /// The body of the `index`th message of the overflow test: `m<index>:`, then 8 KiB of text
    /// (even indexes: the JSON event has `text`) or of every byte value (odd: not UTF-8).
    static func overflowBody(_ index: Int) -> [UInt8] {
        Array("m\(index):".utf8) + (0..<8192).map { k in index % 2 == 0 ? UInt8(ascii: "a") + UInt8(k % 26) : UInt8(truncatingIfNeeded: k &* 7 &+ index) }
    }

    /// The index a body of `overflowBody` names, if the body is exactly that one's.
    static func overflowIndex(_ body: [UInt8]) -> Int? {
        guard body.first == UInt8(ascii: "m"), let colon = body.prefix(16).firstIndex(of: UInt8(ascii: ":")),
              let index = Int(String(decoding: body[1..<colon], as: UTF8.self)), body == overflowBody(index) else { return nil }
        return index
    }

    /// What one event read off a stalled or resumed subscription was.
    enum ReadEvent { case message(cursor: Int64, ReadMessage), overflow(resume: Int64), other }

    /// The next event on `connection`: a JSON line, or (`binary`) a frame, its body read raw.
    static func nextEvent(_ connection: RawControlConnection, binary: Bool) throws -> ReadEvent {
        if binary {
            let (kind, payload) = try connection.frame()
            if kind == EventFrame.message {
                return try payload.withUnsafeBytes { bytes in
                    guard let m = MessageFrame(bytes) else { throw TestTimeout(description: "a message frame that does not parse") }
                    let from = String(m.from, radix: 16)
                    let msg = String(repeating: "0", count: 16 - from.count) + from + "-\(m.counter)"
                    guard let index = overflowIndex(Array(m.body)) else { throw TestTimeout(description: "a body not as sent: \(msg)") }
                    #expect(m.isUTF8 == (index % 2 == 0), "the UTF-8 flag of \(msg)")
                    return .message(cursor: Int64(m.cursor), ReadMessage(msg: msg, index: index))
                }
            }
            #expect(kind == EventFrame.json, "a frame of kind \(kind)")
            let event = try JSON.parse(Array(payload.dropLast())).objectValue ?? [:]
            return event["event"]?.stringValue == "overflow" ? .overflow(resume: event["resume"]?.intValue ?? -1) : .other
        }
        let event = try JSON.parse(Array(try connection.line().utf8)).objectValue ?? [:]
        switch event["event"]?.stringValue {
        case "overflow": return .overflow(resume: event["resume"]?.intValue ?? -1)
        case "message":
            guard let cursor = event["cursor"]?.intValue, let msg = event["msg"]?.stringValue,
                  let data = event["data"]?.stringValue.flatMap({ Data(base64Encoded: $0) }),
                  let index = overflowIndex(Array(data)) else { throw TestTimeout(description: "a message event not as sent: \(event["msg"]?.stringValue ?? "?")") }
            #expect(event["text"]?.stringValue == (index % 2 == 0 ? String(decoding: data, as: UTF8.self) : nil), "text of \(msg)")
            return .message(cursor: cursor, ReadMessage(msg: msg, index: index))
        default: return .other
        }
    }

    /// A stalled subscription read up to its `overflow`, then a resubscription (same encoding) from
    /// its `resume` read up to the latest cursor: every message by cursor, and the resume.
    static func readThroughOverflow(_ stalled: RawControlConnection, control: String, binary: Bool) throws -> (messages: [Int64: ReadMessage], resume: Int64) {
        var messages: [Int64: ReadMessage] = [:]
        var last: Int64?
        var resume: Int64?
        while resume == nil {
            switch try nextEvent(stalled, binary: binary) {
            case let .message(cursor, m):
                #expect(last == nil || cursor == last! + 1, "cursors before the overflow are consecutive (binary: \(binary))")
                last = cursor
                messages[cursor] = m
            case let .overflow(r): resume = r
            case .other: break
            }
        }
        let from = resume ?? 0
        #expect(from == last, "resume names the last cursor sent (binary: \(binary))")
        let again = try RawControlConnection(path: control)
        defer { again.close() }
        let encoding = binary ? #","encoding":"binary""# : ""
        let reply = try again.roundTrip(#"{"op":"subscribe","topics":["messages"],"since":\#(from)\#(encoding)}"#)
        let latest = reply["cursor"]?.intValue ?? 0
        var next = from + 1
        while next <= latest {
            guard case let .message(cursor, m) = try nextEvent(again, binary: binary) else { continue }
            #expect(cursor == next, "replayed cursors are consecutive from the resume (binary: \(binary))")
            messages[cursor] = m
            next = cursor + 1
        }
        return (messages, from)
    }

    /// Both encodings through an overflow and a resume: a JSON-lines subscriber and a binary one read
    /// nothing while 7,000 messages of 8 KiB are sent (past half of retention's 10,000 events), so
    /// each is sent `overflow` (at a different cursor: its window holds fewer lines than frames);
    /// each resubscribes from its `resume` and reads to the latest. Both saw every cursor, each with
    /// the same message, its body byte for byte as sent (raw in the frames, base64 and text in the
    /// lines), and every message sent exactly once.
    @Test func bothEncodingsCarryTheSameEventsThroughAnOverflowAndResume() async throws {
        let cluster = try TestCluster("frameover")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let lines = try RawControlConnection(path: a.control)
        defer { lines.close() }
        _ = try lines.roundTrip(#"{"op":"subscribe","topics":["messages"]}"#)
        let frames = try RawControlConnection(path: a.control)
        defer { frames.close() }
        #expect(try frames.roundTrip(#"{"op":"subscribe","topics":["messages"],"encoding":"binary"}"#)["encoding"] == .string("binary"))
        let sender = try RawControlConnection(path: a.control)
        defer { sender.close() }
        let count = 7000
        var accepted = 0
        for burst in stride(from: 0, to: count, by: 500) {
            let range = burst..<min(burst + 500, count)
            for i in range { try sender.send(#"{"op":"send","data":"\#(Data(Self.overflowBody(i)).base64EncodedString())"}"#) }
            for _ in range {
                if try sender.line().contains(#""ok":true"#) { accepted += 1 }
            }
        }
        #expect(accepted == count)
        let control = a.control
        let (fromLines, linesResume) = try Self.readThroughOverflow(lines, control: control, binary: false)
        let (fromFrames, framesResume) = try Self.readThroughOverflow(frames, control: control, binary: true)
        #expect(fromLines.count >= count && fromFrames.count >= count, "\(fromLines.count) lines, \(fromFrames.count) frames")
        #expect(fromLines == fromFrames, "the same message at every cursor in both encodings (resumes \(linesResume) and \(framesResume))")
        #expect(Set(fromFrames.values.map(\.index)) == Set(0..<count) && fromFrames.count == Set(fromFrames.values.map(\.msg)).count,
                "every message sent, once")
    }

    /// A sender that pipelines `send` requests on one connection, `perBurst` at a time, until stopped.
    final class BurstSender: Sendable {
        private let stopped = Atomic<Bool>(false)
        func stop() { stopped.store(true, ordering: .relaxed) }

        /// Runs on its own thread; how many sends were answered ok.
        func run(control: String, perBurst: Int) throws -> Int {
            let raw = try RawControlConnection(path: control)
            var ok = 0, sent = 0
            while !stopped.load(ordering: .relaxed) {
                var batch = ""
                for i in 0..<perBurst { batch += #"{"op":"send","text":"burst-\#(sent + i)"}"# + (i + 1 < perBurst ? "\n" : "") }
                try raw.send(batch)
                sent += perBurst
                for _ in 0..<perBurst {
                    if try raw.line().contains(#""ok":true"#) { ok += 1 }
                }
            }
            return ok
        }
    }

    @Test func aMemberKilledDuringABurstLosesAndRepeatsNoEventAcrossTheRestart() async throws {
        let cluster = try TestCluster("burst")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let before = try await EventCollector.subscribe(a, topics: ["messages"])
        let sender = BurstSender()
        let control = b.control
        // On a thread of its own: its reads block.
        let sending = Task { await offThePool { Result { try sender.run(control: control, perBurst: 400) } } }
        try await eventually("a to deliver part of the burst") { await before.events.count >= 500 }

        kill(a.process.processIdentifier, SIGKILL)
        // The burst ends with the kill: what a missed while down stays within what b retains for it.
        sender.stop()
        _ = try await a.waitForExit()
        let (seen, resumeFrom) = await before.endedOnPurpose()
        let accepted = try await sending.value.get()
        let back = try await cluster.start("a", join: [b.addr])
        #expect(try await back.request("status")["resumed"] == .bool(true))
        let after = try await EventCollector.subscribe(back, topics: ["messages"], since: resumeFrom)
        try await eventually("a to deliver every message of the burst", within: 120) {
            (seen + (await after.events)).compactMap(Delivered.init).count >= accepted
        }
        let events = try await eventsAcrossTheRestart(seen, then: after)
        let texts = events.compactMap(Delivered.init).map(\.text)
        #expect(texts.count == accepted, "every accepted message once: \(texts.count) delivered, \(accepted) accepted")
        #expect(Set(texts) == Set((0..<accepted).map { "burst-\($0)" }), "the burst's messages, none missing")
        #expect(seen.count < accepted, "the kill came during the burst (\(seen.count) of \(accepted) seen before it)")
        await after.stop()
    }
}
