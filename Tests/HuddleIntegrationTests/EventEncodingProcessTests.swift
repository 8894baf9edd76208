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
