import Foundation
import HuddleControl

/// A blocking Unix-socket connection that writes raw lines, for feeding a node malformed requests
/// or reading streams line by line without parsing them (a stalled or very long subscription).
final class RawControlConnection {
    private let fd: Int32
    private var pending: [UInt8] = []

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else { throw TestTimeout(description: "cannot connect to \(path)") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends `line` and returns the next line the node writes, parsed.
    func roundTrip(_ line: String) throws -> JSONObject {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        while true {
            if let newline = pending.firstIndex(of: 0x0A) {
                let reply = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                guard case let .object(object) = try JSON.parse(reply) else { throw TestTimeout(description: "reply is not an object") }
                return object
            }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw TestTimeout(description: "connection closed or timed out waiting for a reply") }
            pending.append(contentsOf: buffer[..<n])
        }
    }

    /// Writes `line` and a newline, all of it.
    func send(_ line: String) throws {
        let bytes = Array(line.utf8) + [0x0A]
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw TestTimeout(description: "control connection closed while writing") }
            done += n
        }
    }

    /// The next frame the node writes on a framed connection (after a binary `subscribe`): its kind and payload.
    func frame() throws -> (kind: UInt8, payload: [UInt8]) {
        while true {
            if pending.count >= EventFrame.headerBytes {
                let length = Int(pending[0]) << 24 | Int(pending[1]) << 16 | Int(pending[2]) << 8 | Int(pending[3])
                guard length >= 1 else { throw TestTimeout(description: "a frame of length 0") }
                if pending.count >= 4 + length {
                    let kind = pending[4]
                    let payload = Array(pending[EventFrame.headerBytes..<(4 + length)])
                    pending.removeSubrange(..<(4 + length))
                    return (kind, payload)
                }
            }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw TestTimeout(description: "connection closed or timed out waiting for a frame") }
            pending.append(contentsOf: buffer[..<n])
        }
    }

    /// The next line the node writes, unparsed (for streams too large to parse whole).
    func line() throws -> String {
        var scanned = 0
        while true {
            if let newline = pending[scanned...].firstIndex(of: 0x0A) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                return line
            }
            scanned = pending.count
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw TestTimeout(description: "connection closed or timed out waiting for a line") }
            pending.append(contentsOf: buffer[..<n])
        }
    }

    /// The `cursor` of an event line (it comes right after `event`).
    static func cursor(_ line: String) -> Int64? {
        guard let range = line.prefix(100).range(of: #""cursor":"#) else { return nil }
        return Int64(line[range.upperBound...].prefix { $0.isNumber })
    }

    func close() { Glibc.close(fd) }
}
