import Foundation
import HuddleControl
import NIOCore
import NIOPosix

/// The Unix-socket control server: JSON lines in, one reply per request, events after subscribe.
enum ControlServer {
    typealias ServerChannel = NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>

    static let maximumLine = 1 << 20

    /// Binds `path` (mode 0600). Refuses a path where a live node answers; replaces a stale socket file.
    static func bind(path: String) async throws -> ServerChannel {
        guard path.utf8.count <= 103 else {
            throw NodeError("control socket path is \(path.utf8.count) bytes; Unix sockets allow at most 103: \(path)")
        }
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty && !FileManager.default.fileExists(atPath: directory) {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        if FileManager.default.fileExists(atPath: path) {
            if await isLive(path) {
                throw NodeError("another node is already running at \(path) (its control socket answers); stop it or choose another --control path")
            }
            try? FileManager.default.removeItem(atPath: path)
        }
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            // A subscriber reading large events takes up to this much (Linux doubles it, capped by
            // net.core.wmem_max) per wake-up of the node's event loop, instead of the default
            // ~200 KiB: on a busy machine that is what lets a fast stream reach a client at all.
            .childChannelOption(.socketOption(.so_sndbuf), value: 2 << 20)
            .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: false) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(isOutboundHalfClosureEnabled: true)
                    )
                }
            }
        guard chmod(path, 0o600) == 0 else { throw NodeError("cannot set mode 0600 on control socket \(path)") }
        return server
    }

    private static func isLive(_ path: String) async -> Bool {
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(1))
                .connect(unixDomainSocketPath: path)
                .get()
            try? await channel.close()
            return true
        } catch {
            return false
        }
    }

    /// Serves one client until it disconnects or the node stops.
    static func serve(_ channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, node: Node) async {
        let connection = ControlConnection()
        let written = channel.channel.eventLoop.makePromise(of: Void.self)
        connection.startWriting(to: channel.channel, done: written)
        do {
            try await channel.executeThenClose { inbound, _ in
                var splitter = LineSplitter(limit: maximumLine)
                for try await chunk in inbound {
                    // Every request one read brought is answered in one visit to the node (in order).
                    let items = splitter.add(chunk.readableBytesView)
                    if !items.isEmpty { await node.handleControl(items, on: connection) }
                }
                await node.unsubscribe(connection)
                connection.outbox.close()
                // Every reply is out (and the node's side half-closed) before the channel closes.
                try await written.futureResult.get()
            }
        } catch {
            await node.unsubscribe(connection)
            connection.outbox.close()
        }
    }
}

/// Cuts a byte stream into `\n`-terminated lines, refusing (and skipping to the next newline) any
/// line longer than `limit` without buffering it.
struct LineSplitter {
    enum Item { case line([UInt8]), tooLong }
    let limit: Int
    private var pending: [UInt8] = []
    private var discarding = false

    init(limit: Int) { self.limit = limit }

    mutating func add(_ bytes: ByteBufferView) -> [Item] {
        var items: [Item] = []
        var rest = bytes[...]
        while !rest.isEmpty {
            let newline = rest.firstIndex(of: 0x0A)
            let piece = rest[..<(newline ?? rest.endIndex)]
            if !discarding {
                if pending.count + piece.count > limit {
                    discarding = true
                    pending = []
                    items.append(.tooLong)
                } else {
                    pending.append(contentsOf: piece)
                }
            }
            guard let newline else { break }
            if discarding {
                discarding = false
            } else {
                if pending.last == 0x0D { pending.removeLast() }
                if !pending.isEmpty { items.append(.line(pending)) }
            }
            pending.removeAll(keepingCapacity: true)
            rest = rest[rest.index(after: newline)...]
        }
        return items
    }
}
