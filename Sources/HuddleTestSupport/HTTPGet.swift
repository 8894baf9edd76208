import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Why `httpGet` got no reply (or `loopbackTCPConnection` no connection).
public struct HTTPGetError: Error, CustomStringConvertible {
    public let description: String
}

/// A blocking TCP socket connected to 127.0.0.1:`port`, whose reads give up after
/// `receiveTimeoutSeconds`; the caller closes it.
public func loopbackTCPConnection(port: Int, receiveTimeoutSeconds: Int) throws(HTTPGetError) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HTTPGetError(description: "socket: errno \(errno)") }
    var timeout = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(clamping: port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard connected == 0 else {
        let failure = errno
        close(fd)
        throw HTTPGetError(description: "connect to 127.0.0.1:\(port): errno \(failure)")
    }
    return fd
}

/// `GET path` from 127.0.0.1:`port` over HTTP/1.1 (`Connection: close`; read to the end), on a
/// thread of its own (`offThePool`); a 10 s receive timeout bounds it.
public func httpGet(port: Int, _ path: String) async throws -> (status: Int, body: String) {
    let result: Result<(Int, String), HTTPGetError> = await offThePool {
        let fd: Int32
        do throws(HTTPGetError) { fd = try loopbackTCPConnection(port: port, receiveTimeoutSeconds: 10) } catch { return .failure(error) }
        defer { close(fd) }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            reply += buffer.prefix(n)
        }
        let text = String(decoding: reply, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { return .failure(HTTPGetError(description: "no HTTP reply from 127.0.0.1:\(port)\(path): \(text.prefix(200))")) }
        let status = Int(text[..<split.lowerBound].split(separator: " ").dropFirst().first ?? "") ?? 0
        var body = String(text[split.upperBound...])
        // Prometheus may answer chunked: join the chunks.
        if text[..<split.lowerBound].lowercased().contains("transfer-encoding: chunked") { body = dechunk(body) }
        return .success((status, body))
    }
    return try result.get()
}

/// The body of a chunked HTTP/1.1 reply.
private func dechunk(_ text: String) -> String {
    var bytes = Array(text.utf8)[...]
    var out: [UInt8] = []
    while let lineEnd = bytes.firstIndex(of: 0x0D) {
        let size = Int(String(decoding: bytes[bytes.startIndex..<lineEnd], as: UTF8.self).split(separator: ";").first ?? "", radix: 16) ?? 0
        let start = lineEnd + 2
        guard size > 0, start + size <= bytes.endIndex else { break }
        out += bytes[start..<start + size]
        bytes = bytes[min(bytes.endIndex, start + size + 2)...]
    }
    return String(decoding: out, as: UTF8.self)
}
