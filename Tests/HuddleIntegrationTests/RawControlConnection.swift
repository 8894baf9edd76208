import Foundation
import HuddleControl

/// A blocking Unix-socket connection that writes raw lines, for feeding a node malformed requests.
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

    func close() { Glibc.close(fd) }
}
