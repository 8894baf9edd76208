import Foundation

/// Sends `send` requests over one control connection without waiting for each reply (the control
/// protocol answers requests on a connection in order), the way a busy application would.
enum PipelinedSender {
    static func send(to path: String, text: String, count: Int) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        let ok = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard ok == 0 else { throw BenchError(description: "cannot connect to \(path)") }
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

/// Counts `message` events on a subscription by scanning raw bytes (no JSON decoding), so the
/// measuring side is never the bottleneck. Returns messages per second from first to last.
enum RawEventCounter {
    static func rate(control path: String, count: Int) throws -> Double {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        let ok = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard ok == 0 else { throw BenchError(description: "cannot connect to \(path)") }
        let subscribe = Array(#"{"op":"subscribe","topics":["messages"]}"#.utf8) + [0x0A]
        _ = subscribe.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let needle = Array(#""event":"message""#.utf8)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var carry: [UInt8] = []
        var seen = 0
        var first: Date?
        while seen < count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw BenchError(description: "subscription closed after \(seen) messages") }
            let chunk = carry + buffer[..<n]
            var i = 0
            while i + needle.count <= chunk.count {
                if chunk[i] == needle[0] && chunk[i..<(i + needle.count)].elementsEqual(needle) {
                    seen += 1
                    if first == nil { first = Date() }
                    i += needle.count
                } else {
                    i += 1
                }
            }
            if chunk.count >= needle.count { carry = Array(chunk[(chunk.count - needle.count + 1)...]) } else { carry = chunk }
        }
        return Double(seen) / max(Date().timeIntervalSince(first ?? Date()), 1e-6)
    }
}
