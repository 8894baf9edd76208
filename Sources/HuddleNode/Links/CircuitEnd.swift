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
/// that came before the socket was ready; at most `queueBytes` of them wait unwritten per circuit
/// (one circuit per peer), and at most `CircuitQueue.totalBytes` across all of a node's circuits
/// (`deliver` says false beyond either: the circuit is to be closed); `close` ends the link over it.
final class CircuitEnd: Sendable {
    let peer: MemberID
    let via: MemberID
    /// Most bytes from the relay that wait for the link's reader, per circuit.
    static let queueBytes = 4 << 20
    /// Bytes waiting here at which the node stops reading the link to the relay until they drain
    /// (`Node.paceCircuits`): far under `queueBytes`, so a circuit is closed for it only when the
    /// relay goes on past that pause.
    static let pauseBytes = 1 << 20
    /// The node's count of bytes waiting across its circuits.
    private let total: CircuitQueue

    private struct State {
        var channel: Channel?
        var early: [ByteBuffer] = []
        var queued = 0
        var closed = false
    }
    private let state = Mutex(State())

    init(peer: MemberID, via: MemberID, total: CircuitQueue) {
        self.peer = peer
        self.via = via
        self.total = total
    }

    /// Bytes from the relay not yet written to the link's socket.
    var queuedBytes: Int { state.withLock { $0.queued } }

    /// Bytes from the relay for the link's reader; false when `queueBytes` already wait here, or
    /// `CircuitQueue.totalBytes` across the node's circuits.
    func deliver(_ bytes: [UInt8]) -> Bool {
        let buffer = ByteBuffer(bytes: bytes)
        return state.withLock { s in
            guard !s.closed else { return true }
            guard s.queued + bytes.count <= Self.queueBytes, total.take(bytes.count) else { return false }
            s.queued += bytes.count
            if let channel = s.channel { write(buffer, to: channel) } else { s.early.append(buffer) }
            return true
        }
    }

    /// Writes under the lock: the event loop takes writes in the order they were made.
    private func write(_ buffer: ByteBuffer, to channel: Channel) {
        let n = buffer.readableBytes
        channel.writeAndFlush(buffer).whenComplete { [self] _ in
            state.withLock { $0.queued -= n }
            total.give(n)
        }
    }

    /// Ends the circuit here: the link over it sees its connection close.
    func close() {
        let channel = state.withLock { s -> Channel? in
            s.closed = true
            // Bytes that never reached a socket give their share back (written ones do as they complete).
            total.give(s.early.reduce(0) { $0 + $1.readableBytes })
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

/// The bytes from relays waiting for the links over a node's circuits, across all of them
/// (`CircuitEnd`): at most `totalBytes`, however many circuits a node has. Sendable: an atomic.
final class CircuitQueue: Sendable {
    /// Most bytes waiting across a node's circuits: four circuits' worth.
    static let totalBytes = 4 * CircuitEnd.queueBytes
    private let queued = Atomic<Int>(0)

    /// Takes `n` bytes of the budget: false (nothing taken) when that would pass `totalBytes`.
    func take(_ n: Int) -> Bool {
        var current = queued.load(ordering: .relaxed)
        while true {
            guard n <= Self.totalBytes - current else { return false }
            let (exchanged, original) = queued.compareExchange(expected: current, desired: current + n, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    /// Gives `n` bytes back.
    func give(_ n: Int) { if n > 0 { queued.subtract(n, ordering: .relaxed) } }

    var bytes: Int { queued.load(ordering: .relaxed) }
}
