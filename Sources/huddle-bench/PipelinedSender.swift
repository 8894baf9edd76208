import Foundation

/// Sends `send` requests over one control connection without waiting for each reply (the control
/// protocol answers requests on a connection in order), the way a busy application would.
enum PipelinedSender {
    static func send(to path: String, text: String, count: Int) throws {
        let fd = try connectUnix(path)
        defer { close(fd) }
        let line = Array(#"{"op":"send","text":"\#(text)"}"#.utf8) + [0x0A]
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

/// Counts `message` events on a subscription by counting lines in the raw bytes (no JSON decoding), so the
/// measuring side is never the bottleneck. Returns messages per second from first to last.
enum RawEventCounter {
    static func rate(control path: String, count: Int) throws -> Double {
        let fd = try connectUnix(path)
        defer { close(fd) }
        // A stalled subscription (or one the node dropped with an `overflow` event) fails the
        // scenario after 30 s without events instead of hanging the benchmark.
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let subscribe = Array(#"{"op":"subscribe","topics":["messages"]}"#.utf8) + [0x0A]
        _ = subscribe.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        // The subscription carries only message events, one JSON line each (after the one reply
        // line), so counting newlines counts messages.
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var lines = 0
        var first: Date?
        var tail: [UInt8] = []
        while lines - 1 < count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else {
                let last = String(decoding: tail, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
                let why = n == 0 ? "closed" : last.contains(#""event":"overflow""#) ? "dropped by the node: \(last)" : "silent for 30 s"
                throw BenchError(description: "subscription \(why) after \(max(lines - 1, 0)) of \(count) messages")
            }
            tail = Array(buffer[max(0, n - 256)..<n])

            lines += buffer.withUnsafeBufferPointer { raw in
                var c = 0
                for i in 0..<n where raw[i] == 0x0A { c += 1 }
                return c
            }
            if first == nil && lines > 1 { first = Date() }
        }
        let seen = lines - 1
        return Double(seen) / max(Date().timeIntervalSince(first ?? Date()), 1e-6)
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
