import Foundation
import HuddleControl
import Testing

/// The event log's retention on disk and its overflow rule (CONTROL.md: a subscriber that falls
/// behind gets `overflow` with a cursor to resume from, and may resubscribe with `since`).
@Suite(.serialized) struct EventLogProcessTests {
    /// A subscriber that reads nothing while ~150 MiB of message lines are produced is sent
    /// `overflow` (its backlog is not buffered for it); resubscribing with `since: resume` replays
    /// every event after it from the retained log — megabytes read back from the spool's segment
    /// files — with consecutive cursors up to the latest.
    @Test func stalledSubscriberOverflowsAndResumesFromTheSpool() async throws {
        let cluster = try TestCluster("spool")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let stalled = try RawLines(path: a.control)
        try stalled.send(#"{"op":"subscribe","topics":["messages"]}"#)
        let body = String(repeating: "x", count: 60 * 1024)
        let sender = try RawLines(path: a.control)
        let count = 1200
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
        let again = try RawLines(path: a.control)
        try again.send(#"{"op":"subscribe","topics":["messages"],"since":\#(resume ?? 0)}"#)
        let reply = try JSON.parse(Array(try again.line().utf8)).objectValue ?? [:]
        let latest = reply["cursor"]?.intValue ?? 0
        #expect(latest == Int64(count))
        var next = (resume ?? 0) + 1
        while next <= latest {
            let line = try again.line()
            // Only the cursor is parsed (the lines are 80 KiB each).
            guard let cursor = RawLines.cursor(line) else { Issue.record("not an event: \(line.prefix(120))"); return }
            #expect(cursor == next, "replayed cursors are consecutive")
            #expect(line.utf8.count > 2 * body.count, "the whole message line")
            next = cursor + 1
        }
    }
}

/// A blocking control connection that writes request lines and reads lines, for tests that must
/// not read (a stalled subscriber) or read a great deal.
final class RawLines {
    private let fd: Int32
    private var pending: [UInt8] = []

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        let ok = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard ok == 0 else { close(fd); throw TestTimeout(description: "cannot connect to \(path)") }
        var timeout = timeval(tv_sec: 120, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ line: String) throws {
        let bytes = Array(line.utf8) + [0x0A]
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw TestTimeout(description: "control connection closed while writing") }
            done += n
        }
    }

    func line() throws -> String {
        var scanned = 0
        while true {
            if let newline = pending[scanned...].firstIndex(of: 0x0A) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeFirst(newline + 1)
                return line
            }
            scanned = pending.count
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw TestTimeout(description: "control connection \(n == 0 ? "closed" : "silent for 120 s")") }
            pending += buffer[..<n]
        }
    }

    /// The `cursor` of an event line (it comes right after `event`).
    static func cursor(_ line: String) -> Int64? {
        guard let range = line.prefix(100).range(of: #""cursor":"#) else { return nil }
        return Int64(line[range.upperBound...].prefix { $0.isNumber })
    }
}
