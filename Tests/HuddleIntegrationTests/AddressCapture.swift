import Foundation
import NIOCore
import NIOPosix

/// Takes over a stopped node's address (`127.0.0.1:port`, UDP and TCP) and records everything
/// sent there: each datagram whole, and the first frame (`u16 length | bytes`, a link handshake's
/// first message) of each TCP connection, which is then closed. Each record carries when it
/// arrived, so a test can split the capture at a moment (a removal). It can also send datagrams
/// from that address, as the node there would.
actor AddressCapture {
    /// One thing sent to the address.
    struct Record: Sendable {
        enum Kind: Sendable { case datagram, firstFrame }
        let kind: Kind
        let bytes: [UInt8]
        let at: ContinuousClock.Instant
    }

    private(set) var records: [Record] = []
    private var udp: Channel?
    private var tcp: Channel?

    func record(_ record: Record) { records.append(record) }

    /// Binds `port` on 127.0.0.1 for UDP and TCP (retrying for up to 30 s while the stopped
    /// node's sockets are still being released).
    func start(port: Int) async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            do {
                if udp == nil {
                    udp = try await DatagramBootstrap(group: group)
                        .channelOption(.socketOption(.so_reuseaddr), value: 1)
                        .channelInitializer { [self] channel in
                            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(DatagramRecorder(capture: self)) }
                        }
                        .bind(host: "127.0.0.1", port: port).get()
                }
                tcp = try await ServerBootstrap(group: group)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .childChannelInitializer { [self] channel in
                        channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(FirstFrameRecorder(capture: self)) }
                    }
                    .bind(host: "127.0.0.1", port: port).get()
                return
            } catch {
                guard ContinuousClock.now < deadline else { throw TestTimeout(description: "cannot bind 127.0.0.1:\(port): \(error)") }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// Takes over an address whose sockets are already bound (and the TCP one listening): the two
    /// a `StallableRelay` hands over, so the port is never free for another process to take.
    func start(tcp boundTCP: Int32, udp boundUDP: Int32) async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        udp = try await DatagramBootstrap(group: group)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(DatagramRecorder(capture: self)) }
            }
            .withBoundSocket(boundUDP).get()
        tcp = try await ServerBootstrap(group: group)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(FirstFrameRecorder(capture: self)) }
            }
            .withBoundSocket(boundTCP).get()
    }

    /// Sends `datagram` from the captured address to `addr` (`127.0.0.1:port`).
    func send(_ datagram: [UInt8], to addr: String) async throws {
        let parts = addr.split(separator: ":")
        guard let udp, parts.count == 2, let port = Int(parts[1]) else { throw TestTimeout(description: "cannot send to \(addr)") }
        let target = try SocketAddress(ipAddress: String(parts[0]), port: port)
        try await udp.writeAndFlush(AddressedEnvelope(remoteAddress: target, data: ByteBuffer(bytes: datagram))).get()
    }

    func stop() async {
        try? await udp?.close().get()
        try? await tcp?.close().get()
    }

    private final class DatagramRecorder: ChannelInboundHandler, Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        let capture: AddressCapture
        init(capture: AddressCapture) { self.capture = capture }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let record = Record(kind: .datagram, bytes: Array(unwrapInboundIn(data).data.readableBytesView), at: .now)
            let capture = self.capture
            Task { await capture.record(record) }
        }
    }

    /// Collects a connection's bytes until its first frame is whole, records it, and closes.
    private final class FirstFrameRecorder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let capture: AddressCapture
        var buffered: [UInt8] = []
        var done = false
        init(capture: AddressCapture) { self.capture = capture }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !done else { return }
            buffered.append(contentsOf: unwrapInboundIn(data).readableBytesView)
            guard buffered.count >= 2 else { return }
            let length = Int(buffered[0]) << 8 | Int(buffered[1])
            guard buffered.count >= 2 + length else { return }
            done = true
            let record = Record(kind: .firstFrame, bytes: Array(buffered[2..<2 + length]), at: .now)
            let capture = self.capture
            Task { await capture.record(record) }
            context.close(promise: nil)
        }
    }
}

/// One blocking TCP exchange of link frames (`u16 length | bytes`) with `addr`, off the
/// cooperative pool: `conversation` makes the first frame to send and what answers each frame
/// received (nil: send nothing more); the exchange lasts until the peer closes or `seconds` pass
/// without a frame. Returns the frames received, and how many of them were answered.
func exchangeFrames(with addr: String, seconds: Int = 5,
                    conversation: @escaping @Sendable () throws -> (first: [UInt8], answer: ([UInt8]) -> [UInt8]?)) async throws -> (frames: [[UInt8]], answered: Int) {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(with: Result {
                let (first, answer) = try conversation()
                return try blockingExchange(addr, first: first, seconds: seconds, answer: answer)
            })
        }
    }
}

private func blockingExchange(_ addr: String, first: [UInt8], seconds: Int, answer: ([UInt8]) -> [UInt8]?) throws -> (frames: [[UInt8]], answered: Int) {
    let parts = addr.split(separator: ":")
    guard parts.count == 2, let port = UInt16(parts[1]) else { throw TestTimeout(description: "bad address \(addr)") }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestTimeout(description: "no TCP socket") }
    defer { close(fd) }
    var timeout = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, String(parts[0]), &address.sin_addr)
    let connected = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw TestTimeout(description: "cannot connect to \(addr)") }
    func write(_ frame: [UInt8]) -> Bool {
        let bytes = [UInt8(frame.count >> 8), UInt8(frame.count & 0xff)] + frame
        return send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count
    }
    func read(_ count: Int) -> [UInt8]? {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: count)
        while out.count < count {
            let n = recv(fd, &chunk, count - out.count, 0)
            guard n > 0 else { return nil }
            out += chunk[0..<n]
        }
        return out
    }
    guard write(first) else { return ([], 0) }
    var received: [[UInt8]] = []
    var answered = 0
    while let header = read(2), let frame = read(Int(header[0]) << 8 | Int(header[1])) {
        received.append(frame)
        guard let reply = answer(frame) else { continue }
        answered += 1
        if !write(reply) { break }
    }
    return (received, answered)
}
