import NIOCore
import NIOPosix

/// An async client for one control connection. Requests are answered in order (CONTROL.md), so
/// replies are matched first-in first-out; event lines are kept for `events()` in arrival order.
/// A `subscribe` with `"encoding": "binary"` switches the connection to frames once the node's
/// reply says it did (README, "Binary event frames"); events read the same either way.
public actor ControlClient {
    private let outgoing: AsyncStream<ByteBuffer>.Continuation
    /// Each request waiting for its reply, and whether an ok reply switches the connection to frames.
    private var pending: [(reply: CheckedContinuation<JSONObject, Error>, framing: Bool)] = []
    private var incoming = ReplyStream()
    private var nextID: Int64 = 1
    private var closed = false
    private var bufferedEvents: [JSONObject] = []
    private var eventContinuation: AsyncThrowingStream<JSONObject, Error>.Continuation?
    private var eventStream: AsyncThrowingStream<JSONObject, Error>?
    private var connectionTask: Task<Void, Never>?

    private init(outgoing: AsyncStream<ByteBuffer>.Continuation) { self.outgoing = outgoing }

    /// Connects to the node's control socket at `path`, unless the path or its directory belongs
    /// to another user than this one or root (then `untrustedPath`: their socket could pose as the
    /// node); `noNode` when nothing listens there.
    public static func connect(path: String) async throws(ControlError) -> ControlClient {
        _ = try ControlPathCheck.check(path, allowRoot: true)
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(5))
                .connect(unixDomainSocketPath: path) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw ControlError.noNode(path: path)
        }
        let (writes, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
        let client = ControlClient(outgoing: continuation)
        await client.start(channel, writes: writes)
        return client
    }

    private func start(_ channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, writes: AsyncStream<ByteBuffer>) {
        connectionTask = Task { [weak self] in
            try? await channel.executeThenClose { inbound, outbound in
                await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await buffer in writes { try await outbound.write(buffer) }
                    }
                    do {
                        for try await chunk in inbound { await self?.received(chunk) }
                    } catch {}
                    group.cancelAll()
                }
            }
            await self?.connectionEnded()
        }
    }

    /// Sends `request` and returns the node's reply, decoded for its op (`ControlResponse`), when it
    /// is `ok`; throws the node's refusal when not (a `ControlError` with a wire code), `closed` or
    /// `badReply` when the connection fails or the reply is not the one CONTROL.md defines for the op.
    public func request(_ request: ControlRequest) async throws -> ControlResponse {
        var framing = false
        if case .subscribe(_, _, .binary) = request { framing = true }
        let reply = try await send(request.encoded(id: .int(nextID)), framing: framing)
        return try ControlResponse(reply, for: request)
    }

    /// The raw escape hatch, for tests only (`@_spi(Testing) import HuddleControl`): sends `object`
    /// as it is (with an `id` unless it has one) and returns the `ok` reply undecoded. What needs
    /// it: requests `ControlRequest` cannot state (ill-typed or unknown fields and ops, values over
    /// a limit), sent so that a test sees the node's own refusal of them.
    @_spi(Testing) public func requestUnchecked(_ object: JSONObject) async throws -> JSONObject {
        var line = object
        if line["id"] == nil { line["id"] = .int(nextID) }
        return try await send(line, framing: false)
    }

    /// Writes one request line and waits for its reply: the reply when `ok`, else its error thrown.
    private func send(_ request: JSONObject, framing: Bool) async throws -> JSONObject {
        guard !closed else { throw ControlError.closed }
        nextID += 1
        var bytes: [UInt8] = []
        JSON.object(request).write(into: &bytes)
        bytes.append(0x0A)
        let reply = try await withCheckedThrowingContinuation { (c: CheckedContinuation<JSONObject, Error>) in
            pending.append((c, framing))
            outgoing.yield(ByteBuffer(bytes: bytes))
        }
        if reply["ok"] == .bool(true) { return reply }
        let error = reply["error"]?.objectValue
        let code = error?["code"]?.stringValue.flatMap(ControlError.Code.init(wire:)) ?? .internal
        throw ControlError(code, error?["message"]?.stringValue ?? "the node answered with an error")
    }

    /// Event lines (objects with an `event` key), from the first one received on this connection.
    public func events() -> AsyncThrowingStream<JSONObject, Error> {
        if let eventStream { return eventStream }
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: JSONObject.self)
        for event in bufferedEvents { continuation.yield(event) }
        bufferedEvents = []
        if closed { continuation.finish() }
        eventContinuation = continuation
        eventStream = stream
        return stream
    }

    public func close() {
        outgoing.finish()
        connectionTask?.cancel()
        connectionEnded()
    }

    /// One read's bytes: its lines or frames, in order (a reply that switches to frames takes
    /// effect for the very next byte).
    private func received(_ chunk: ByteBuffer) {
        incoming.append(chunk.readableBytesView)
        while true {
            let item: ReplyStream.Item?
            do { item = try incoming.next() } catch {
                pending.first?.reply.resume(throwing: error)
                if !pending.isEmpty { pending.removeFirst() }
                close()
                return
            }
            switch item {
            case nil: return
            case let .line(line): received(line)
            case let .message(event): deliver(event)
            }
        }
    }

    private func received(_ line: [UInt8]) {
        guard case let .object(object)? = try? JSON.parse(line) else {
            pending.first?.reply.resume(throwing: ControlError.badReply(String(decoding: line.prefix(200), as: UTF8.self)))
            if !pending.isEmpty { pending.removeFirst() }
            return
        }
        if object["event"] != nil, object["ok"] == nil { return deliver(object) }
        guard !pending.isEmpty else { return }
        let (reply, framing) = pending.removeFirst()
        // A node that does not know the extension answers without `encoding`: lines go on.
        if framing, object["encoding"] == .string(ControlEncoding.binary.rawValue) { incoming.framed = true }
        reply.resume(returning: object)
    }

    private func deliver(_ event: JSONObject) {
        if let eventContinuation { eventContinuation.yield(event) } else { bufferedEvents.append(event) }
    }

    private func connectionEnded() {
        guard !closed else { return }
        closed = true
        for c in pending { c.reply.resume(throwing: ControlError.closed) }
        pending = []
        eventContinuation?.finish()
        outgoing.finish()
    }
}

/// Splits what a node writes into lines at `\n` (without the newline), or, once `framed`, into
/// frames (`EventFrame`): a `json` frame gives its line, a `message` frame its event as the object
/// its JSON line parses to. Never buffers more than one frame of at most `maximumFrame` bytes
/// beyond what it was given.
struct ReplyStream {
    enum Item { case line([UInt8]), message(JSONObject) }
    /// The longest frame taken: a node's longest line (a request line is at most 1 MiB; an event
    /// or a reply with an attachment list can be longer).
    static let maximumFrame = 64 << 20
    var framed = false
    private var buffer: [UInt8] = []
    private var start = 0

    mutating func append(_ bytes: some Collection<UInt8>) {
        if start > 0 && start * 2 >= buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole line or frame; nil until more bytes come.
    mutating func next() throws -> Item? {
        while start < buffer.count {
            if !framed {
                guard let newline = buffer[start...].firstIndex(of: 0x0A) else { return nil }
                defer { start = newline + 1 }
                if newline > start { return .line(Array(buffer[start..<newline])) }
                continue
            }
            let start = start
            let parsed = try buffer.withUnsafeBytes { bytes throws -> (Item, Int)? in
                guard bytes.count - start >= EventFrame.headerBytes else { return nil }
                guard let length = EventFrame.frameLength(bytes, at: start), length <= Self.maximumFrame else {
                    throw ControlError.badReply("a frame of length 0 or over \(Self.maximumFrame) bytes")
                }
                guard length <= bytes.count - start else { return nil }
                let payload = UnsafeRawBufferPointer(rebasing: bytes[(start + EventFrame.headerBytes)..<(start + length)])
                switch bytes[start + 4] {
                case EventFrame.json:
                    return (.line(Array(payload.prefix { $0 != 0x0A })), length)
                case EventFrame.message:
                    var line: [UInt8] = []
                    guard let m = MessageFrame(payload) else { throw ControlError.badReply("a message frame that does not parse") }
                    m.writeLine(into: &line)
                    guard case let .object(object)? = try? JSON.parse(line) else { throw ControlError.badReply("a message frame that does not parse") }
                    return (.message(object), length)
                default:
                    throw ControlError.badReply("a frame of unknown kind \(bytes[start + 4])")
                }
            }
            guard let (item, length) = parsed else { return nil }
            self.start = start + length
            return item
        }
        return nil
    }
}
