import NIOCore
import NIOPosix

/// Why a client could not talk to a node.
public enum ControlClientError: Error, CustomStringConvertible, Sendable {
    /// Nothing listens at the control path (the CLI exits 3).
    case noNode(path: String)
    /// The node closed the connection before answering.
    case closed
    /// The node wrote something that is not a JSON object line.
    case badReply(String)
    /// The path, or its directory, belongs to another user (`ControlPathCheck`): not connected.
    case untrusted(ControlPathError)

    public var description: String {
        switch self {
        case let .noNode(path): "no node is running at \(path)"
        case .closed: "the node closed the control connection"
        case let .badReply(why): "unreadable reply from the node: \(why)"
        case let .untrusted(error): error.message
        }
    }
}

/// An async client for one control connection. Requests are answered in order (CONTROL.md), so
/// replies are matched first-in first-out; event lines are kept for `events()` in arrival order.
public actor ControlClient {
    private let outgoing: AsyncStream<ByteBuffer>.Continuation
    private var pending: [CheckedContinuation<JSONObject, Error>] = []
    private var nextID: Int64 = 1
    private var closed = false
    private var bufferedEvents: [JSONObject] = []
    private var eventContinuation: AsyncThrowingStream<JSONObject, Error>.Continuation?
    private var eventStream: AsyncThrowingStream<JSONObject, Error>?
    private var connectionTask: Task<Void, Never>?

    private init(outgoing: AsyncStream<ByteBuffer>.Continuation) { self.outgoing = outgoing }

    /// Connects to the node's control socket at `path`, unless the path or its directory belongs
    /// to another user than this one or root (then `untrusted`: their socket could pose as the node).
    public static func connect(path: String) async throws -> ControlClient {
        do { _ = try ControlPathCheck.check(path, allowRoot: true) } catch { throw ControlClientError.untrusted(error) }
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
            throw ControlClientError.noNode(path: path)
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
                    var lines = LineBuffer()
                    do {
                        for try await chunk in inbound {
                            for line in lines.add(chunk.readableBytesView) { await self?.received(line) }
                        }
                    } catch {}
                    group.cancelAll()
                }
            }
            await self?.connectionEnded()
        }
    }

    /// Sends `op` with `fields` and returns the reply when it is `ok`; throws `ControlError` when not.
    public func request(_ op: String, _ fields: JSONObject = [:]) async throws -> JSONObject {
        guard !closed else { throw ControlClientError.closed }
        var request: JSONObject = ["op": .string(op), "id": .int(nextID)]
        nextID += 1
        for (key, value) in fields { request[key] = value }
        var bytes: [UInt8] = []
        JSON.object(request).write(into: &bytes)
        bytes.append(0x0A)
        let reply = try await withCheckedThrowingContinuation { (c: CheckedContinuation<JSONObject, Error>) in
            pending.append(c)
            outgoing.yield(ByteBuffer(bytes: bytes))
        }
        if reply["ok"] == .bool(true) { return reply }
        let error = reply["error"]?.objectValue
        let code = error?["code"]?.stringValue.flatMap(ControlErrorCode.init(rawValue:)) ?? .internal
        throw ControlError(code: code, message: error?["message"]?.stringValue ?? "the node answered with an error")
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

    private func received(_ line: [UInt8]) {
        guard case let .object(object)? = try? JSON.parse(line) else {
            pending.first?.resume(throwing: ControlClientError.badReply(String(decoding: line.prefix(200), as: UTF8.self)))
            if !pending.isEmpty { pending.removeFirst() }
            return
        }
        if object["event"] != nil, object["ok"] == nil {
            if let eventContinuation { eventContinuation.yield(object) } else { bufferedEvents.append(object) }
            return
        }
        guard !pending.isEmpty else { return }
        pending.removeFirst().resume(returning: object)
    }

    private func connectionEnded() {
        guard !closed else { return }
        closed = true
        for c in pending { c.resume(throwing: ControlClientError.closed) }
        pending = []
        eventContinuation?.finish()
        outgoing.finish()
    }
}

/// Splits a byte stream into lines at `\n` (without the newline).
struct LineBuffer {
    private var pending: [UInt8] = []

    mutating func add(_ bytes: some Collection<UInt8>) -> [[UInt8]] {
        pending.append(contentsOf: bytes)
        var lines: [[UInt8]] = []
        var start = 0
        while let newline = pending[start...].firstIndex(of: 0x0A) {
            if newline > start { lines.append(Array(pending[start..<newline])) }
            start = newline + 1
        }
        pending.removeFirst(start)
        return lines
    }
}
