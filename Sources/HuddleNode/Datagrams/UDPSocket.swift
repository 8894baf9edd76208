#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import NIOCore
import Synchronization

/// The node's UDP socket, driven directly with POSIX calls rather than a NIO channel.
///
/// Why not NIO: a NIO datagram channel closes itself on any `sendmsg` error other than
/// EMSGSIZE/EHOSTUNREACH, and a host firewall that drops outgoing packets (an nft/iptables
/// `output … drop` rule, a partition) makes `sendmsg` fail with EPERM — one refused datagram would
/// silence the node's membership for good. Here a failed send is one lost datagram, counted, and
/// the socket stays open. Guarantees: `send` never blocks (a full send buffer drops the datagram);
/// `receive` blocks at most `pollMilliseconds`; after `close()` both return at once.
final class UDPSocket: Sendable {
    private let fd: Int32
    private let closed = Atomic<Bool>(false)
    static let pollMilliseconds: Int32 = 200

    /// Binds `host:port` (port 0 picks a free one) with SO_REUSEADDR.
    init(host: String, port: Int) throws {
        let address = try SocketAddress.makeAddressResolvingHost(host, port: port)
        let family: Int32 = if case .v6 = address { AF_INET6 } else { AF_INET }
        fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw NodeError("socket(): \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 0, tv_usec: Int(Self.pollMilliseconds) * 1000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer: Int32 = 4 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, socklen_t(MemoryLayout<Int32>.size))
        let bound = Self.withSockaddr(address) { bind(fd, $0, $1) }
        guard bound == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw NodeError(reason)
        }
    }

    deinit { Glibc.close(fd) }

    /// The bound port (the chosen one when bound to port 0).
    var port: Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Self.socketAddress(storage)?.port ?? 0
    }

    /// Sends one datagram; false when the kernel refused it (EPERM from a firewall, ENETUNREACH, a
    /// full send buffer). Never throws, never blocks.
    @discardableResult
    func send(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress) -> Bool {
        guard !closed.load(ordering: .relaxed) else { return false }
        let sent = Self.withSockaddr(address) { sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, $1) }
        return sent >= 0
    }

    /// Waits up to `pollMilliseconds` for one datagram and writes it into `buffer`: its length and
    /// sender, nil on timeout, or `.closed` once the socket is closed.
    enum Received { case datagram(Int, SocketAddress), timeout, closed }
    func receive(into buffer: UnsafeMutableRawBufferPointer) -> Received {
        while !closed.load(ordering: .relaxed) {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let n = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, buffer.baseAddress, buffer.count, 0, $0, &length) }
            }
            if n >= 0 {
                guard let from = Self.socketAddress(storage) else { continue }
                return .datagram(n, from)
            }
            switch errno {
            case EAGAIN, EWOULDBLOCK: return .timeout
            case EINTR: continue
            // ECONNREFUSED and friends report an ICMP error for an earlier send: not fatal.
            default: continue
            }
        }
        return .closed
    }

    /// Stops `send` and `receive` (a blocked receive returns within `pollMilliseconds`).
    func close() { closed.store(true, ordering: .relaxed) }

    private static func socketAddress(_ storage: sockaddr_storage) -> SocketAddress? {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee) } }
        case AF_INET6:
            return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee) } }
        default:
            return nil
        }
    }

    private static func withSockaddr<R>(_ address: SocketAddress, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        switch address {
        case let .v4(a):
            var raw = a.address
            return withUnsafePointer(to: &raw) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        case let .v6(a):
            var raw = a.address
            return withUnsafePointer(to: &raw) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        case .unixDomainSocket:
            var raw = sockaddr()
            return body(&raw, 0)
        }
    }
}
