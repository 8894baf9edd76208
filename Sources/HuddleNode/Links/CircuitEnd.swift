import Glibc
import HuddleCore
import NIOCore
import NIOPosix
import Synchronization

/// This member's end of a circuit through a relay (issue 36, item 2): a connected Unix socket
/// pair in this process. The link to the circuit's peer runs over one socket exactly as it runs
/// over a TCP connection (`LinkSession.run`: the same handshake, ciphers and framing, end to end
/// with the peer); this end moves the other socket's bytes to and from the relay as `circuitData`
/// link messages. The relay sees only that link's ciphertext.
///
/// Guarantees: bytes from the relay reach the link's reader in the order they came, also those
/// that came before the socket was ready; at most `queueBytes` of them wait unwritten (`deliver`
/// says false beyond that: the circuit is to be closed); `close` ends the link over it.
final class CircuitEnd: Sendable {
    let peer: MemberID
    let via: MemberID
    /// Most bytes from the relay that wait for the link's reader.
    static let queueBytes = 4 << 20

    private struct State {
        var channel: Channel?
        var early: [ByteBuffer] = []
        var queued = 0
        var closed = false
    }
    private let state = Mutex(State())

    init(peer: MemberID, via: MemberID) {
        self.peer = peer
        self.via = via
    }

    /// Bytes from the relay for the link's reader; false when `queueBytes` already wait.
    func deliver(_ bytes: [UInt8]) -> Bool {
        let buffer = ByteBuffer(bytes: bytes)
        return state.withLock { s in
            guard !s.closed else { return true }
            guard s.queued + bytes.count <= Self.queueBytes else { return false }
            s.queued += bytes.count
            if let channel = s.channel { write(buffer, to: channel) } else { s.early.append(buffer) }
            return true
        }
    }

    /// Writes under the lock: the event loop takes writes in the order they were made.
    private func write(_ buffer: ByteBuffer, to channel: Channel) {
        let n = buffer.readableBytes
        channel.writeAndFlush(buffer).whenComplete { [self] _ in state.withLock { $0.queued -= n } }
    }

    /// Ends the circuit here: the link over it sees its connection close.
    func close() {
        let channel = state.withLock { s -> Channel? in
            s.closed = true
            s.early = []
            return s.channel
        }
        channel?.close(promise: nil)
    }

    /// The two sockets: the link's (framed, as `LinkSession.wrap` frames a TCP connection) and this
    /// end's (reads of at most `LinkMessage.circuitDataLimit` bytes, one `circuitData` each).
    func open() async throws -> (link: FrameChannel, pump: NIOAsyncChannel<ByteBuffer, ByteBuffer>) {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else {
            throw NodeError("cannot make a socket pair for a circuit: \(String(cString: strerror(errno)))")
        }
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        let link: FrameChannel
        do {
            link = try await bootstrap.withConnectedSocket(fds[0]) { channel in
                channel.eventLoop.makeCompletedFuture { try LinkSession.wrap(channel) }
            }
        } catch {
            closeDescriptor(fds[1])
            throw error
        }
        let pump = try await bootstrap.withConnectedSocket(fds[1]) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.syncOptions?.setOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: LinkMessage.circuitDataLimit))
                return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel, configuration: .init(backPressureStrategy: .init(lowWatermark: 2, highWatermark: 4)))
            }
        }
        let closed = state.withLock { s -> Bool in
            guard !s.closed else { return true }
            s.channel = pump.channel
            for buffer in s.early { write(buffer, to: pump.channel) }
            s.early = []
            return false
        }
        if closed {
            link.channel.close(promise: nil)
            pump.channel.close(promise: nil)
            throw NodeError("circuit to \(peer) closed while it was being set up")
        }
        return (link, pump)
    }

    private func closeDescriptor(_ fd: Int32) { _ = Glibc.close(fd) }
}
