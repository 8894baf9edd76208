import Foundation
import HuddleCore
import HuddleCrypto

/// What went wrong for the adversary itself (connecting, handshaking, writing).
public struct AdversaryError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A hostile member: it holds the session key and its own node key, opens a real link to a node
/// (TCP and the Noise handshake, as any member does) and then writes whatever link messages it
/// likes, encoded by our own codec. Used by the hostile-member tests and `huddle-bench`'s attacker
/// scenario; it never reads what the node sends (a link that never reads is one of its attacks).
///
/// Blocking socket calls: one adversary link belongs to one thread or task at a time.
public final class AdversaryLink {
    private let fd: Int32
    private var send: NoiseCipherState
    /// The receiving cipher, until `startReading` hands it to its reader thread.
    private var receive: NoiseCipherState?
    /// The link's datagram keys, as the adversary holds them: what it may seal datagrams with.
    public let datagramKeys: PairDatagramKeys

    /// Links to `host:port` as `info` (which the node checks against `identity` only by the key the
    /// handshake proves, as it does for everyone). `receiveBuffer`: a socket receive buffer this
    /// small (bytes), so that what the node sends and the adversary never reads backs up at once.
    public init(host: String, port: UInt16, key: SessionKey, identity: Identity, info: MemberInfo, receiveBuffer: Int32? = nil) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw AdversaryError("no socket: \(String(cString: strerror(errno)))") }
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard ok == 0 else {
            Glibc.close(fd)
            throw AdversaryError("cannot connect to \(host):\(port)")
        }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // A node that stops reading (a throttled link) makes a write fail after a while, not hang.
        var sendTimeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, socklen_t(MemoryLayout<timeval>.size))
        do {
            var handshake = try LinkHandshake(role: .initiator, sessionKey: key, identity: identity, appPayload: info.encoded())
            try Self.writeFrame(fd, try handshake.start(), patience: 0)
            guard let reply = try handshake.receive(try Self.readFrame(fd)) else { throw AdversaryError("no handshake message 3") }
            try Self.writeFrame(fd, reply, patience: 0)
            guard let result = handshake.result else { throw AdversaryError("handshake incomplete") }
            self.fd = fd
            send = result.send
            receive = result.receive
            datagramKeys = result.datagramKeys
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// Links to a `host:port` address string.
    public convenience init(addr: String, key: SessionKey, identity: Identity, info: MemberInfo, receiveBuffer: Int32? = nil) throws {
        let parts = addr.split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1]) else { throw AdversaryError("bad address \(addr)") }
        try self.init(host: String(parts[0]), port: port, key: key, identity: identity, info: info, receiveBuffer: receiveBuffer)
    }

    /// Writes one link message (split into records as the node's own links do).
    public func write(_ message: LinkMessage) throws {
        try write(encoded: message.encoded())
    }

    /// Writes one already-encoded link message: the way to send bytes our encoder would never make.
    public func write(encoded: [UInt8]) throws {
        for record in LinkRecords.split(encoded) { try Self.writeFrame(fd, try send.encrypt(ad: [], plaintext: record), patience: patience) }
    }

    /// Seconds a write keeps trying while the node reads nothing (each try waits the socket's
    /// 2 s send timeout). 0, the default: a write fails at the first timeout, so a node that stops
    /// reading ends a flood; a flood meant to be read whole on a loaded machine sets more.
    public var patience: Double = 0

    /// Reads what the node sends on this link, on a thread of its own, until the link closes (or a
    /// record does not decrypt or reassemble): `handler` gets each whole link message that
    /// decodes. Once only; the adversary then reads everything (so nothing backs up).
    public func startReading(_ handler: @escaping @Sendable (LinkMessage) -> Void) {
        guard let initial = receive else { return }
        receive = nil
        let fd = self.fd
        Thread {
            var cipher = initial
            var reassembler = LinkReassembler(limit: 16 << 20)
            while true {
                guard let frame = try? Self.readFrame(fd, waiting: true), let record = try? cipher.decrypt(ad: [], ciphertext: frame) else {
                    if Self.isOpen(fd) { continue } else { return }
                }
                // nil: the message goes on in later records.
                if case let whole?? = try? reassembler.add(record), let message = try? LinkMessage.decode(whole) { handler(message) }
            }
        }.start()
    }

    private var closed = false

    /// Closes the link (once; later calls do nothing).
    public func close() {
        guard !closed else { return }
        closed = true
        shutdown(fd, Int32(SHUT_RDWR))  // ends a reader thread's read before the fd goes
        Glibc.close(fd)
    }

    deinit { close() }

    private static func writeFrame(_ fd: Int32, _ bytes: [UInt8], patience: Double) throws {
        let frame = [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
        var offset = 0
        let giveUp = ContinuousClock.now + .milliseconds(Int64(patience * 1000))
        while offset < frame.count {
            let n = frame.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0, errno == EAGAIN || errno == EINTR, ContinuousClock.now < giveUp { continue }
            guard n > 0 else { throw AdversaryError("link write failed: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// `waiting`: a read that times out (the socket's receive timeout) tries again.
    private static func readExactly(_ fd: Int32, _ count: Int, waiting: Bool = false) throws -> [UInt8] {
        var out: [UInt8] = []
        while out.count < count {
            var buffer = [UInt8](repeating: 0, count: count - out.count)
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, waiting, errno == EAGAIN || errno == EINTR { continue }
            guard n > 0 else { throw AdversaryError("link closed") }
            out += buffer[..<n]
        }
        return out
    }

    private static func readFrame(_ fd: Int32, waiting: Bool = false) throws -> [UInt8] {
        let header = try readExactly(fd, 2, waiting: waiting)
        return try readExactly(fd, Int(header[0]) << 8 | Int(header[1]), waiting: waiting)
    }

    /// False once the link's socket was shut down or closed by either end (then a reader stops).
    private static func isOpen(_ fd: Int32) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 0) >= 0 else { return false }
        if poller.revents & Int16(POLLNVAL | POLLHUP | POLLERR) != 0 { return false }
        if poller.revents & Int16(POLLIN) != 0 {
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0
        }
        return true
    }
}
