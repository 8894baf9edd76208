import Foundation

extension Scenarios {
    // MARK: a subscriber that reads slowly

    /// 16 KiB throughput to three receivers while the third one's subscriber reads slowly (4 MB/s
    /// of event lines, against ~100 MB/s produced): its node must not buffer the backlog in memory
    /// but send it `overflow`; the subscriber then resubscribes with `since` at full speed and must
    /// receive every message exactly once.
    func slowSubscriber() async throws -> [BenchRow] {
        let cluster = try HuddleCluster(binary: huddle, label: "slow")
        defer { cluster.stop() }
        try await cluster.start(4)
        let size = 16384
        let count = quick ? 4000 : 10000
        let slowControl = cluster.controls[3]
        async let slow = onThread { try SlowReader.run(control: slowControl, count: count, bytesPerSecond: 4e6) }
        let rates = try await pipelinedRates(cluster, receivers: Array(cluster.controls[1...2]), size: size, count: count).rates
        let result = try await slow
        let usage = cluster.usage()
        let slowRSS = usage.count == 4 ? usage[3].peakRSSMiB : .nan
        let worstRSS = usage.map(\.peakRSSMiB).max() ?? .nan
        let complete = result.missing == 0 && result.duplicates == 0
        let overflow = result.overflows.first.map { first in
            let more = result.overflows.count > 1 ? ", \(result.overflows.count - 1) more while catching up" : ""
            return "overflow at cursor \(first.cursor) (resume \(first.resume))\(more)"
        } ?? "no overflow"
        let met = !result.overflows.isEmpty && complete && worstRSS <= 64
        return [BenchRow(scenario: "slow subscriber, 16 KiB throughput", measure: "a subscriber reading 4 MB/s: overflow, resubscribe with since, messages received; peak RSS of its node",
                         huddle: "\(overflow); then \(result.received) of \(count) messages (missing \(result.missing), duplicates \(result.duplicates)); slow subscriber's node \(fmt(slowRSS, 0)) MiB; other receivers \(Int(rates.min() ?? 0)) msgs/s",
                         comparison: "", ratio: "",
                         target: "overflow, then every message once, RSS ≤ 64 MiB: " + (met ? "met" : "missed"))]
    }
}

/// A subscriber that reads message events slowly until the node sends it `overflow`, then
/// resubscribes from the cursor it was given and reads at full speed; it tracks which of the
/// sender's seqs 1...count it saw and how often.
enum SlowReader {
    struct Result {
        /// Each overflow the node sent: the cursor then, and the resume cursor it named.
        var overflows: [(cursor: Int, resume: Int)] = []
        var received = 0
        var missing = 0
        var duplicates = 0
    }

    static func run(control: String, count: Int, bytesPerSecond: Double) throws -> Result {
        var seen = [UInt8](repeating: 0, count: count + 1)
        var result = Result()
        var fd = try subscribe(control, since: nil)
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var slow = true
        var total = 0
        var lastCursor = 0
        while total < count {
            var n: Int
            // A signal (a child process of the bench exiting) ends a read with a receive timeout
            // early (signal(7)): read again, it is not the node's silence.
            repeat { n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, slow ? 64 << 10 : $0.count) } } while n < 0 && errno == EINTR
            guard n > 0 else {
                let why = n == 0 ? "closed" : errno == EAGAIN || errno == EWOULDBLOCK ? "silent for 30 s" : "unreadable (\(String(cString: strerror(errno))))"
                close(fd)
                let missing = (1...count).filter { seen[$0] == 0 }
                let overflows = result.overflows
                let said = overflows.isEmpty ? "no overflow came" : "overflows (cursor, resume): " + overflows.map { "(\($0.cursor), \($0.resume))" }.joined(separator: " ")
                throw BenchError(description: "slow subscriber's stream \(why) after \(total) of \(count) messages"
                    + " (\(said); last cursor read \(lastCursor); missing seqs \(missing.first ?? 0)...\(missing.last ?? 0); the node's status then: \(statusLine(control)))")
            }
            pending.append(contentsOf: buffer[..<n])
            var start = 0
            var resubscribe: Int64?
            while let newline = pending[start...].firstIndex(of: 0x0A) {
                let line = pending[start..<newline]
                start = newline + 1
                if let c = field(line, "\"cursor\":") { lastCursor = c }
                if let seq = field(line, "\"seq\":") {
                    guard seq >= 1 && seq <= count else { continue }
                    if seen[seq] > 0 { result.duplicates += 1 } else { total += 1 }
                    seen[seq] &+= 1
                } else if line.starts(with: Array(#"{"event":"overflow""#.utf8)), let resume = field(line, "\"resume\":") {
                    result.overflows.append((field(line, "\"cursor\":") ?? 0, resume))
                    resubscribe = Int64(resume)
                    break
                }
            }
            pending.removeFirst(start)
            if let since = resubscribe {
                close(fd)
                pending = []
                slow = false
                fd = try subscribe(control, since: since)
                continue
            }
            if slow { Thread.sleep(forTimeInterval: Double(n) / bytesPerSecond) }
        }
        close(fd)
        result.received = total
        result.missing = count - total
        return result
    }

    /// The decimal after `key` near the start of `line` (message and overflow lines put theirs early).
    private static func field(_ line: ArraySlice<UInt8>, _ key: String) -> Int? {
        let pattern = Array(key.utf8)
        let head = line.prefix(200)
        guard head.count >= pattern.count else { return nil }
        var i = head.startIndex
        while i + pattern.count <= head.endIndex {
            if head[i..<i + pattern.count].elementsEqual(pattern) {
                var value = 0, j = i + pattern.count, digits = 0
                while j < head.endIndex, head[j] >= 0x30, head[j] <= 0x39 { value = value * 10 + Int(head[j] - 0x30); j += 1; digits += 1 }
                return digits > 0 ? value : nil
            }
            i += 1
        }
        return nil
    }

    /// The node's `status` reply (its delivered clock says whether it has the messages the
    /// subscriber misses), or why it could not be had.
    private static func statusLine(_ path: String) -> String {
        guard let fd = try? connectUnix(path) else { return "no connection" }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = Array(#"{"op":"status"}"#.utf8) + [0x0A]
        _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        var line: [UInt8] = [], byte: UInt8 = 0
        while line.count < 4096, read(fd, &byte, 1) == 1, byte != 0x0A { line.append(byte) }
        return line.isEmpty ? "no reply" : String(decoding: line, as: UTF8.self)
    }

    private static func subscribe(_ path: String, since: Int64?) throws -> Int32 {
        let fd = try connectUnix(path)
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = Array((since.map { #"{"op":"subscribe","topics":["messages"],"since":\#($0)}"# } ?? #"{"op":"subscribe","topics":["messages"]}"#).utf8) + [0x0A]
        _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        return fd
    }
}
