import Foundation
import HuddleControl
import Testing

/// The event log's retention on disk and its overflow rule (CONTROL.md: a subscriber that falls
/// behind gets `overflow` with a cursor to resume from, and may resubscribe with `since`).
@Suite(.serialized) struct EventLogProcessTests {
    /// A subscriber that reads nothing while ~150 MiB of events are produced (as the log keeps them:
    /// frames, each message's body once; ~360 MiB as JSON lines) is sent
    /// `overflow` (its backlog is not buffered for it); resubscribing with `since: resume` replays
    /// every event after it from the retained log — megabytes read back from the spool's segment
    /// files — with consecutive cursors up to the latest.
    @Test func stalledSubscriberOverflowsAndResumesFromTheSpool() async throws {
        let cluster = try TestCluster("spool")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let stalled = try RawControlConnection(path: a.control)
        try stalled.send(#"{"op":"subscribe","topics":["messages"]}"#)
        let body = String(repeating: "x", count: 60 * 1024)
        let sender = try RawControlConnection(path: a.control)
        let count = 2600
        for _ in 0..<count { try sender.send(#"{"op":"send","text":"\#(body)"}"#) }
        for _ in 0..<count { _ = try sender.line() }
        // The stalled subscriber's stream: its subscribe reply, message lines, then `overflow`.
        var resume: Int64?
        var last: Int64 = 0
        while resume == nil {
            let line = try stalled.line()
            let event = try JSON.parse(Array(line.utf8)).objectValue ?? [:]
            if event["event"]?.stringValue == "overflow" { resume = event["resume"]?.intValue; break }
            if let cursor = event["cursor"]?.intValue, event["event"] != nil {
                #expect(cursor == last + 1 || last == 0)
                last = cursor
            }
        }
        #expect(resume == last, "resume names the last cursor the subscriber was sent")
        let again = try RawControlConnection(path: a.control)
        try again.send(#"{"op":"subscribe","topics":["messages"],"since":\#(resume ?? 0)}"#)
        let reply = try JSON.parse(Array(try again.line().utf8)).objectValue ?? [:]
        let latest = reply["cursor"]?.intValue ?? 0
        #expect(latest == Int64(count))
        var next = (resume ?? 0) + 1
        while next <= latest {
            let line = try again.line()
            // Only the cursor is parsed (the lines are 80 KiB each).
            guard let cursor = RawControlConnection.cursor(line) else { Issue.record("not an event: \(line.prefix(120))"); return }
            #expect(cursor == next, "replayed cursors are consecutive")
            #expect(line.utf8.count > 2 * body.count, "the whole message line")
            next = cursor + 1
        }
    }
}
