import Glibc
import Logging
import HuddleCore
import HuddleCrypto
import NIOCore
import NIOPosix

/// A TCP connection that carries link frames: `u16 length | bytes`.
typealias FrameChannel = NIOAsyncChannel<[ByteBuffer], ByteBuffer>

enum LinkSession {
    /// How long a handshake may take before the connection is dropped, where no node configures it
    /// (`NodeConfiguration.handshakeTimeoutSeconds` does for the links a node runs).
    static let handshakeTimeout = TimeAmount.seconds(Int64(NodeConfiguration.defaultHandshakeTimeoutSeconds))

    /// The handshake bound `node` runs its links with.
    static func handshakeTimeout(of node: Node) -> TimeAmount {
        .milliseconds(Int64(node.config.handshakeTimeoutSeconds * 1000))
    }
    /// Largest link message accepted from a peer (`LinkMessage.maximumSize`).
    static let maximumMessage = LinkMessage.maximumSize
    /// Largest chunk body accepted from a peer (a 1 MiB chunk and its tag at most).
    static let maximumChunk = (1 << 20) + 64

    /// Largest read from a link's socket. Reads of up to 64 KiB (NIO's default) cut nearly every
    /// 64 KiB chunk frame in two, and a cut frame is copied (`FrameDecoder`).
    static let maximumRead = 1 << 20

    /// Wraps a new TCP channel in framing and an async interface (called on its event loop). At
    /// most 4 reads wait for the link's reader (NIO stops reading the socket beyond that), so a
    /// link buffers at most 4 × `maximumRead` bytes the reader has not taken.
    static func wrap(_ channel: Channel) throws -> FrameChannel {
        try channel.syncOptions?.setOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: maximumRead))
        try channel.pipeline.syncOperations.addHandler(FrameDecoder())
        return try FrameChannel(
            wrappingChannelSynchronously: channel,
            configuration: .init(backPressureStrategy: .init(lowWatermark: 2, highWatermark: 4), isOutboundHalfClosureEnabled: true)
        )
    }

    /// A framed TCP connection to a listen port at `addr`, a numeric `host:port` (nothing is
    /// looked up: `PeerAddress`); one-line `NodeError` when none. `from`: the local address to
    /// dial from — the node's listening one, shared (`SO_REUSEADDR`, `SO_REUSEPORT`) for a hole
    /// punch (`Node+Punch`); nil: any.
    static func connect(_ addr: String, timeout: TimeAmount, from source: SocketAddress? = nil) async throws -> FrameChannel {
        guard let address = PeerAddress.socketAddress(addr) else {
            throw NodeError("cannot connect to \(addr): not a numeric IPv4 or [IPv6] host:port")
        }
        do {
            var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            if let source {
                bootstrap = bootstrap.channelOption(.socketOption(.so_reuseaddr), value: 1)
                    .channelOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
                    .bind(to: source)
            }
            return try await bootstrap
                .connectTimeout(timeout)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .connect(to: address) { channel in
                    channel.eventLoop.makeCompletedFuture { try LinkSession.wrap(channel) }
                }
        } catch {
            throw NodeError("cannot connect to \(addr): \(error)")
        }
    }

    /// Runs one link from handshake to close. `registered` learns the peer once the node has the
    /// link (or why it never will); `ticket`, the accepted connection's handshake slot, is given
    /// back as soon as the handshake has ended either way. A dialer uses `key`; a responder tries
    /// the first message under every key `Node.handshakeKeys` offers (the current epoch's first),
    /// and the node's admission rule decides whether the epoch that opened it lets the peer in.
    /// `via`: the relay of the circuit this link runs over (`CircuitEnd`), nil for a TCP connection.
    static func run(_ channel: FrameChannel, role: LinkHandshake.Role, key: SessionKey? = nil, node: Node, registered: OneShot<MemberID>?,
                    ticket: HandshakeTicket? = nil, via: MemberID? = nil) async {
        let remote = via.map { "a circuit through \($0)" } ?? channel.channel.remoteAddress.map(hostPort) ?? "unknown"
        defer { ticket?.release() }
        do {
            try await channel.executeThenClose { inbound, outbound in
                var frames = FrameIterator(inbound.makeAsyncIterator())
                let timeout = channel.channel.eventLoop.scheduleTask(in: handshakeTimeout(of: node)) { channel.channel.close(promise: nil) }
                defer { timeout.cancel() }
                func writeFrame(_ bytes: [UInt8]) async throws {
                    var buffer = channel.channel.allocator.buffer(capacity: bytes.count + 2)
                    buffer.writeFrame(bytes)
                    node.counters.addSent(.gossip, buffer.readableBytes)
                    try await outbound.write(buffer)
                }
                let done: (result: LinkHandshakeResult, keyHead: [UInt8])
                do {
                    guard let finished = try await handshake(role: role, key: key, node: node, frames: &frames, write: writeFrame, remote: remote) else { return }
                    done = finished
                } catch {
                    throw NodeError(.handshake, "\(error)")
                }
                let result = done.result
                timeout.cancel()
                ticket?.release()
                let peer = try MemberInfo.decode(result.remoteAppPayload)
                let link = LinkHandle(peer: peer, dialer: role == .initiator ? node.local.id : peer.id, channel: channel.channel, via: via, timed: node.metrics != nil)
                switch await node.register(link, nodeKey: result.remoteNodeKey, datagramKeys: result.datagramKeys, keyHead: done.keyHead) {
                case .admitted?:
                    registered?.resume(.success(peer.id))
                    await runTransport(link, result: result, frames: &frames, node: node)
                case .duplicate?:
                    // The member's other link stays: the dial reached it.
                    registered?.resume(.success(peer.id))
                case let .refused(reason)?:
                    registered?.resume(.failure(NodeError("the link to \(remote) was refused here: \(reason.message)")))
                case nil:
                    registered?.resume(.failure(NodeError("the node is stopping")))
                }
            }
        } catch {
            _ = node.counters.handshakeFailures.wrappingAdd(1, ordering: .relaxed)
            if let failed = error as? NodeError, failed.code == .handshake {
                registered?.resume(.failure(failed))
            } else {
                registered?.resume(.failure(NodeError("handshake with \(remote) failed: \(error)")))
            }
            node.log.info("refused link from \(remote): \(error)")
        }
    }

    /// The handshake's messages: the finished handshake and the head of the epoch whose key it
    /// used, or nil when the connection was a pairing by invitation code (answered here).
    private static func handshake(role: LinkHandshake.Role, key: SessionKey?, node: Node, frames: inout FrameIterator,
                                  write: (_ bytes: [UInt8]) async throws -> Void, remote: String) async throws -> (result: LinkHandshakeResult, keyHead: [UInt8])? {
        let payload = node.local.encoded()
        var handshake: LinkHandshake?
        var keyHead: [UInt8] = []
        if role == .initiator {
            guard let key else { throw NodeError("a dialer needs a session key") }
            var dialer = try LinkHandshake(role: .initiator, sessionKey: key, identity: node.security.identity, appPayload: payload)
            try await write(try dialer.start())
            handshake = dialer
            keyHead = key.head
        }
        while handshake?.result == nil {
            guard let frame = try await frames.next() else { throw NodeError("connection closed during the handshake") }
            node.counters.addReceived(.gossip, frame.readableBytes + 2)
            let bytes = Array(frame.readableBytesView)
            guard var current = handshake else {
                // The responder's first message. A listen port also takes pairings by invitation
                // code: they open with their own hello.
                if PairingHandshake.isHello(bytes) {
                    try await PairingSession.respond(hello: bytes, frames: &frames, write: write, remote: remote, node: node)
                    return nil
                }
                for candidate in await node.handshakeKeys() {
                    var attempt = try LinkHandshake(role: .responder, sessionKey: candidate, identity: node.security.identity, appPayload: payload)
                    let reply: [UInt8]?
                    do { reply = try attempt.receive(bytes) } catch { continue }
                    if let reply { try await write(reply) }
                    handshake = attempt
                    keyHead = candidate.head
                    break
                }
                guard handshake != nil else { throw NodeError("the first handshake message opens under no session key this node holds") }
                continue
            }
            if let reply = try current.receive(bytes) { try await write(reply) }
            handshake = current
        }
        guard let result = handshake?.result else { return nil }
        return (result, keyHead)
    }

    /// Seconds on a monotonic clock, for the link ciphers' rekey timer.
    static func uptimeSeconds() -> Double { Double(NIODeadline.now().uptimeNanoseconds) / 1e9 }

    /// Bytes a batch takes on the wire, framed (encrypted records add a 1-byte record header and a
    /// 16-byte tag; every frame a 2-byte length).
    static func framedSize(of batch: [LinkOutbound]) -> Int {
        func framed(_ count: Int, overhead: Int) -> Int { count + max(1, (count + 65_534) / 65_535) * overhead }
        return batch.reduce(0) { total, item in
            switch item {
            case let .message(message): total + framed(message.count, overhead: 19)
            case let .chunk(header, body): total + framed(header.count, overhead: 19) + framed(body.count, overhead: 2)
            }
        }
    }

    /// After the handshake: the link's outbox is written by `ChannelPump` (encrypted on the event
    /// loop); this task reads until close.
    private static func runTransport(
        _ link: LinkHandle, result: LinkHandshakeResult,
        frames: inout FrameIterator, node: Node
    ) async {
        let written = link.channel.eventLoop.makePromise(of: Void.self)
        // Used only on the link's event loop, where the pump encodes.
        let sealer = LinkSealer(result.send, now: uptimeSeconds(), rekeyBytes: node.config.linkRekeyBytes, rekeyInterval: node.config.linkRekeyInterval)
        let sendCipher = NIOLoopBoundBox.makeBoxSendingValue(sealer, eventLoop: link.channel.eventLoop)
        let metrics = node.metrics
        ChannelPump.run(link.outbox, to: link.channel, done: written) { batch, allocator in
            if let metrics, let wait = link.outbox.takeItemsWait() { metrics.record(.linkQueue, wait) }
            return try encode(batch, cipher: &sendCipher.value, allocator: allocator, counters: node.counters)
        }
        await readTransport(link, receive: result.receive, frames: &frames, node: node)
        // What was queued before the close still goes out, then the output is closed.
        do {
            try await ChannelPump.awaitDrain(written, closing: link.channel)
        } catch {
            node.log.info("link to \(link.peer.id) failed while writing: \(error)")
        }
    }

    /// One buffer holding a batch of the link's outbox: small messages first, encrypted; bulk chunks
    /// after them (order within each kind is kept), their already encrypted bodies as raw frames.
    private static func encode(_ batch: [LinkOutbound], cipher: inout LinkSealer, allocator: ByteBufferAllocator, counters: NodeCounters) throws -> ByteBuffer {
        let now = uptimeSeconds(), rekeysBefore = cipher.rekeys
        defer { if cipher.rekeys > rekeysBefore { _ = counters.linkRekeysSent.wrappingAdd(cipher.rekeys - rekeysBefore, ordering: .relaxed) } }
        // Sized for the whole batch up front: a buffer grown by doubling would copy each 256 KiB
        // chunk body several times over.
        var buffer = allocator.buffer(capacity: framedSize(of: batch))
        for item in batch {
            guard case let .message(message) = item else { continue }
            let before = buffer.readableBytes
            for record in LinkRecords.split(message) {
                buffer.writeFrame(try cipher.seal(record, now: now))
            }
            counters.addSent(LinkMessage.carriesApplicationMessage(message) ? .messages : .gossip, buffer.readableBytes - before)
        }
        for item in batch {
            guard case let .chunk(header, body) = item else { continue }
            let before = buffer.readableBytes
            for record in LinkRecords.split(header) {
                buffer.writeFrame(try cipher.seal(record, now: now))
            }
            body.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let end = min(offset + 65_535, bytes.count)
                    buffer.writeFrame(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
                    offset = end
                }
            }
            counters.addSent(.chunks, buffer.readableBytes - before)
        }
        return buffer
    }

    /// Chunk bodies of one link being checked and stored at once (`storeChunk`). An honest peer
    /// sends at most `Swarm.Settings.window` (3) requested chunks at a time.
    static let chunkTasksPerLink = 4
    /// Read storage one chunk body's frames may keep alive (each slice counted with its whole
    /// read, though several share one) and how many slices it may be kept in; frames beyond either
    /// are copied into one buffer. A 256 KiB chunk from 1 MiB reads stays within both, so a link
    /// holds at most `chunkTasksPerLink` × 4 MiB of reads for chunks being stored.
    static let retainedPerChunk = 4 << 20
    static let retainedPartsPerChunk = 32
    /// Link messages one call hands the node's actor at most (a CPU budget per peer). The node
    /// takes calls from all links in turn, so a message from an honest peer waits behind at most
    /// this many of a flooding peer's, not behind a whole 1 MiB read of them: under issue 33's
    /// held flood (one-byte broadcasts above a gap, ≈ 20,000 to a read) an honest broadcast
    /// waited a median 82.6 ms at the attacked node when a read went over in one call.
    static let messagesPerTurn = 128

    /// Reads the link's frames until it closes: decrypts, reassembles and hands the node what each
    /// read brought, `messagesPerTurn` messages a call at most; then closes the link. A chunk body is checked and stored by a task of its own
    /// (at most `chunkTasksPerLink` per link; the reader waits for one to end beyond that), so the
    /// messages behind it on the link are not held up by its hash, the node's actor or the write:
    /// measured at N = 4 while 100 MiB went to every member, a message waited a median 3.6 ms
    /// (p99 46 ms) behind each chunk the reader was storing. Chunk tasks run at low priority, so
    /// the node's actor takes the messages' work before their bookkeeping.
    private static func readTransport(_ link: LinkHandle, receive: NoiseCipherState, frames: inout FrameIterator, node: Node) async {
        var cipher = LinkOpener(receive)
        var reassembler = LinkReassembler(limit: maximumMessage)
        await withTaskGroup(of: Void.self) { chunkTasks in
            var running = 0
            do {
                // A chunk body being received: the frames it came in so far (slices of the reads,
                // not copied, within `retainedPerChunk`; then one copy of the rest), its bytes so
                // far, the storage its slices keep alive, and whether the last part is that copy.
                var rawChunk: (id: String, index: UInt32, length: Int, parts: [ByteBuffer], received: Int, retained: Int, copying: Bool)?
                var messageBytes = 0
                while let batch = try await frames.nextBatch() {
                    let readAt = ContinuousClock.now
                    // Everything one read brought is handed to the node in one call, in order.
                    var messages: [LinkMessage] = []
                    for frame in batch {
                        if var chunk = rawChunk {
                            rawChunk = nil
                            chunk.received += frame.readableBytes
                            if !chunk.copying && chunk.parts.count < retainedPartsPerChunk
                                && chunk.retained + frame.storageCapacity <= retainedPerChunk {
                                chunk.parts.append(frame)
                                chunk.retained += frame.storageCapacity
                            } else {
                                if !chunk.copying {
                                    chunk.copying = true
                                    let rest = max(0, chunk.length - (chunk.received - frame.readableBytes))
                                    chunk.parts.append(link.channel.allocator.buffer(capacity: rest))
                                }
                                chunk.parts[chunk.parts.count - 1].writeImmutableBuffer(frame)
                            }
                            guard chunk.received >= chunk.length else {
                                rawChunk = chunk
                                continue
                            }
                            guard chunk.received == chunk.length else { throw NodeError("chunk body longer than its header said") }
                            node.counters.addReceived(.chunks, chunk.length)
                            // What came before the chunk reaches the node before it.
                            if !messages.isEmpty { await node.linkReceived(link, messages, arrived: readAt) }
                            messages = []
                            if running >= chunkTasksPerLink {
                                await chunkTasks.next()
                                running -= 1
                            }
                            let (id, index, parts) = (chunk.id, Int(chunk.index), chunk.parts)
                            chunkTasks.addTask(priority: .low) { await storeChunk(id: id, index: index, parts: parts, from: link, node: node) }
                            running += 1
                            continue
                        }
                        let rekeysBefore = cipher.rekeys
                        let record = try frame.withUnsafeReadableBytes { try cipher.open($0) }
                        if cipher.rekeys > rekeysBefore { _ = node.counters.linkRekeysReceived.wrappingAdd(1, ordering: .relaxed) }
                        // Every frame of a message counts, not only the one that completes it.
                        messageBytes += frame.readableBytes + 2
                        guard let bytes = try reassembler.add(record) else { continue }
                        let message = try LinkMessage.decode(bytes)
                        defer { messageBytes = 0 }
                        switch message {
                        case let .chunkHeader(id, index, length):
                            guard length > 0, length <= UInt32(maximumChunk) else { throw NodeError("chunk of \(length) bytes (must be 1...\(maximumChunk))") }
                            node.counters.addReceived(.chunks, messageBytes)
                            rawChunk = (id, index, Int(length), [], 0, 0, false)
                            continue
                        case .message, .batch:
                            node.counters.addReceived(.messages, messageBytes)
                        default:
                            node.counters.addReceived(.gossip, messageBytes)
                        }
                        messages.append(message)
                        if messages.count >= messagesPerTurn {
                            await node.linkReceived(link, messages, arrived: readAt)
                            messages.removeAll(keepingCapacity: true)
                        }
                    }
                    if !messages.isEmpty { await node.linkReceived(link, messages, arrived: readAt) }
                }
            } catch {
                _ = node.counters.droppedFrames.wrappingAdd(1, ordering: .relaxed)
                node.log.warning("closing the link to \(link.peer.id): bad frame (\(error))")
                link.channel.close(promise: nil)
            }
        }
        link.close()
        await node.linkClosed(link)
    }

    /// Checks a received chunk body against its manifest hash (on `ChunkIO`, at lowered priority)
    /// and, when the node admits it (`Node.chunkArrived`), writes it on `ChunkIO` and reports `chunkWritten`.
    /// The body stays in the frames it arrived in (slices of the link's reads): hashed and written
    /// part by part, never copied into a fresh 256 KiB array (that copy and its page faults were
    /// ~10 % of a receiver's CPU at N = 8). The slices keep their reads alive until the write ends:
    /// at most `chunkTasksPerLink` chunks per link, each within at most two reads beyond its bytes.
    private static func storeChunk(id: String, index: Int, parts: [ByteBuffer], from link: LinkHandle, node: Node) async {
        // Hashed on `ChunkIO`'s lowered threads, not on the cooperative pool that the node's actor
        // and the link readers (the messages' work) run on.
        // (The pool is never shut down, so this does not throw; were the chunk dropped, its request
        // would time out and be asked again, `Swarm.Settings.requestTimeout`.)
        guard let hash = try? await ChunkIO.run({ ChunkCipher.hash { update in for part in parts { part.withUnsafeReadableBytes(update) } } }) else { return }
        guard let manifest = await node.chunkArrived(id: id, index: index, hash: hash, from: link) else { return }
        let store = node.store
        var failure: String?
        do { try await ChunkIO.run { try store.write(manifest, index, parts: parts) } } catch { failure = "\(error)" }
        await node.chunkWritten(id: id, index: index, from: link.peer.id, error: failure)
    }
}

extension Node {
    /// Opens a link to `addr` and returns the member there once the node has registered the link.
    /// The handshake uses the current epoch's key; when it fails, the next older ones within the grace.
    nonisolated func dial(_ addr: String) async throws -> MemberID {
        let keys = await dialKeys()
        guard !keys.isEmpty else { throw NodeError("this node holds no key of the session (it was removed)") }
        var failure: Error = NodeError("no key to link to \(addr) with")
        for key in keys {
            let channel = try await LinkSession.connect(addr, timeout: .seconds(5))
            do {
                return try await withCheckedThrowingContinuation { continuation in
                    let once = OneShot(continuation)
                    let scheduled = spawner.spawn { [self] in
                        await LinkSession.run(channel, role: .initiator, key: key, node: self, registered: once)
                        once.resume(.failure(NodeError("link to \(addr) closed before it was registered")))
                    }
                    // The node has stopped: nothing will run the link.
                    if !scheduled {
                        channel.channel.close(promise: nil)
                        once.resume(.failure(NodeError("the node is stopping")))
                    }
                }
            } catch let error as NodeError where error.code == .handshake {
                // A wrong key and a wrong admin set look alike here (issue 33: the admin set is bound
                // into every subkey), so the line names both, and the session as this node holds it.
                failure = NodeError("handshake with \(addr) failed (\(error)): the peer is not in session \(key.fingerprint) as this node holds it (another session key, or another admin set)")
            }
        }
        throw failure
    }
}

/// Frames from a link, one at a time (for the handshake) or a read's worth at once (afterwards).
struct FrameIterator {
    private var base: NIOAsyncChannelInboundStream<[ByteBuffer]>.AsyncIterator
    private var pending: [ByteBuffer] = []

    init(_ base: NIOAsyncChannelInboundStream<[ByteBuffer]>.AsyncIterator) { self.base = base }

    mutating func next() async throws -> ByteBuffer? {
        if pending.isEmpty {
            guard let batch = try await base.next() else { return nil }
            pending = batch
        }
        return pending.isEmpty ? nil : pending.removeFirst()
    }

    mutating func nextBatch() async throws -> [ByteBuffer]? {
        if !pending.isEmpty {
            defer { pending = [] }
            return pending
        }
        return try await base.next()
    }
}
