import Foundation

/// Sends `send` requests over one control connection without waiting for each reply (the control
/// protocol answers requests on a connection in order), the way a busy application would.
enum PipelinedSender {
    /// `fields`: more JSON members of each request, written as they are (`,"to":["…"]`).
    static func send(to path: String, text: String, count: Int, fields: String = "") throws {
        let fd = try connectUnix(path)
        defer { close(fd) }
        let line = Array(#"{"op":"send","text":"\#(text)"\#(fields)}"#.utf8) + [0x0A]
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var replies = 0
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while replies < count {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                replies += buffer[..<n].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
            }
            done.signal()
        }
        var batch: [UInt8] = []
        var sent = 0
        while sent < count {
            batch.removeAll(keepingCapacity: true)
            while batch.count < 256 * 1024 && sent < count { batch += line; sent += 1 }
            var offset = 0
            while offset < batch.count {
                let n = batch[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if n <= 0 { throw BenchError(description: "control connection closed while sending") }
                offset += n
            }
        }
        done.wait()
    }
}

/// Counts `message` events on a subscription from the raw bytes (no JSON decoding), so the measuring
/// side is never the bottleneck: lines, or with `binary` frames (README, "Binary event frames"),
/// counted by their length fields. Returns messages per second from first to last, and whether
/// the node took the binary encoding (a node without it answers without `"encoding":"binary"` and
/// sends lines, which are counted then).
enum RawEventCounter {
    static func rate(control path: String, count: Int, binary: Bool = false) throws -> (rate: Double, binary: Bool) {
        let fd = try connectUnix(path)
        defer { close(fd) }
        // A stalled subscription (or one the node dropped with an `overflow` event) fails the
        // scenario after 30 s without events instead of hanging the benchmark.
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let encoding = binary ? #","encoding":"binary""# : ""
        let subscribe = Array(#"{"op":"subscribe","topics":["messages"]\#(encoding)}"#.utf8) + [0x0A]
        _ = subscribe.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var seen = 0
        var first: Date?
        var tail: [UInt8] = []
        // Bytes not yet counted: the reply line first, then (framed) a frame cut by a read.
        var pending: [UInt8] = []
        var replied = false
        var framed = false
        while seen < count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else {
                let last = String(decoding: tail, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
                let why = n == 0 ? "closed" : last.contains(#""event":"overflow""#) ? "dropped by the node: \(last)" : "silent for 30 s"
                throw BenchError(description: "subscription \(why) after \(seen) of \(count) messages")
            }
            tail = Array(buffer[max(0, n - 256)..<n])
            var bytes = buffer[..<n]
            if !replied {
                pending += bytes
                guard let newline = pending.firstIndex(of: 0x0A) else { continue }
                replied = true
                framed = binary && String(decoding: pending[..<newline], as: UTF8.self).contains(#""encoding":"binary""#)
                bytes = pending[(newline + 1)...]
                pending = []
            }
            let before = seen
            if framed {
                pending += bytes
                var at = 0
                while pending.count - at >= 5 {
                    let length = Int(pending[at]) << 24 | Int(pending[at + 1]) << 16 | Int(pending[at + 2]) << 8 | Int(pending[at + 3])
                    guard pending.count - at >= 4 + length else { break }
                    if pending[at + 4] == 1 { seen += 1 }
                    at += 4 + max(length, 1)
                }
                pending.removeFirst(at)
            } else {
                // The subscription carries only message events, one line each.
                seen += bytes.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
            }
            if first == nil && seen > before { first = Date() }
        }
        return (Double(seen) / max(Date().timeIntervalSince(first ?? Date()), 1e-6), framed)
    }
}

/// Runs blocking socket code on its own thread, so it never holds one of the (few) threads of
/// Swift's cooperative pool: three blocked readers on a 2-core machine would starve the sender.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
        }
    }
}

/// A blocking connection to the Unix socket at `path` (a node's control socket).
func connectUnix(_ path: String) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (i, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
    }
    let ok = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
    guard ok == 0 else { close(fd); throw BenchError(description: "cannot connect to \(path)") }
    return fd
}
