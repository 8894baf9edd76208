import CHuddleSystem
import Foundation
import HuddleControl
import NIOCore
import NIOPosix
import Synchronization

/// The Unix-socket control server: JSON lines in, one reply per request, events after subscribe.
enum ControlServer {
    typealias ServerChannel = NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>

    static let maximumLine = 1 << 20

    /// Binds `path` so that no other user can ever reach it: the socket is bound inside a fresh 0700
    /// directory beside `path`, set to 0600 there, and only then hard-linked to `path` (a link never
    /// replaces anything, so two nodes starting at once cannot both win). Refuses a path or directory
    /// of another user's (`ControlPathCheck`) and a path where a live node answers; replaces a stale
    /// socket file of this user's (a killed node's). Connections are checked with `SO_PEERCRED`
    /// (`peerAllowed`).
    static func bind(path: String) async throws -> ServerChannel {
        let directory = (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
        // The socket is first bound at `<directory>/.hXXXXXX/s`, so that path must fit as well.
        let longest = max(path.utf8.count, directory.utf8.count + 10)
        guard longest <= 103 else {
            throw NodeError("control socket path is \(path.utf8.count) bytes; Unix sockets allow at most 103 (and the node needs \(longest) beside it): \(path)")
        }
        if !FileManager.default.fileExists(atPath: directory) {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let found: ControlPathCheck.Found
        do { found = try ControlPathCheck.check(path) } catch { throw NodeError(error.message) }
        if found == .socket {
            if await isLive(path) {
                throw NodeError("another node is already running at \(path) (its control socket answers); stop it or choose another --control path")
            }
            unlink(path)
        }
        var template = Array("\(directory)/.hXXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw NodeError("cannot create a private directory in \(directory) for the control socket: \(String(cString: strerror(errno)))") }
        let privateDirectory = String(cString: made)
        let privatePath = "\(privateDirectory)/s"
        defer {
            unlink(privatePath)
            rmdir(privateDirectory)
        }
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            // A subscriber reading large events takes up to this much (Linux doubles it, capped by
            // net.core.wmem_max) per wake-up of the node's event loop, instead of the default
            // ~200 KiB: on a busy machine that is what lets a fast stream reach a client at all.
            .childChannelOption(.socketOption(.so_sndbuf), value: 2 << 20)
            .bind(unixDomainSocketPath: privatePath, cleanupExistingSocketFile: false) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(isOutboundHalfClosureEnabled: true)
                    )
                }
            }
        guard chmod(privatePath, 0o600) == 0 else {
            try? await server.channel.close()
            throw NodeError("cannot set mode 0600 on the control socket in \(privateDirectory): \(String(cString: strerror(errno)))")
        }
        guard link(privatePath, path) == 0 else {
            let reason = errno == EEXIST ? "another node took it a moment ago" : String(cString: strerror(errno))
            try? await server.channel.close()
            throw NodeError("cannot put the control socket at \(path): \(reason)")
        }
        return server
    }

    /// Users whose connections were refused, so each is logged once.
    private static let refusedUIDs = Mutex<Set<uid_t>>([])

    /// Whether the process at the other end runs as this node's user, or as root (who can read
    /// the node's keys anyway, as with ssh-agent). Anything else, or no credentials, is refused.
    static func peerAllowed(_ channel: Channel, node: Node) async -> Bool {
        guard let provider = channel as? SocketOptionProvider,
              let credentials: huddle_peer_credentials = try? await provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)).get()
        else {
            node.log.warning("closed a control connection whose credentials could not be read (SO_PEERCRED)")
            return false
        }
        if credentials.uid == geteuid() || credentials.uid == 0 { return true }
        if refusedUIDs.withLock({ $0.insert(credentials.uid).inserted }) {
            node.log.warning("refused a control connection from uid \(credentials.uid) (pid \(credentials.pid)): only uid \(geteuid()) and root may use this node; further refusals of uid \(credentials.uid) are not logged")
        }
        return false
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

    /// Serves one client until it disconnects or the node stops. A client of another user (by
    /// `SO_PEERCRED`) is closed without a reply, before anything it wrote is read.
    static func serve(_ channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, node: Node) async {
        guard await peerAllowed(channel.channel, node: node) else {
            // Closed unread; executeThenClose finishes the writer, as NIO requires.
            try? await channel.executeThenClose { _, _ in }
            return
        }
        let connection = ControlConnection(timed: node.metrics != nil)
        let written = channel.channel.eventLoop.makePromise(of: Void.self)
        connection.startWriting(to: channel.channel, done: written, metrics: node.metrics)
        do {
            try await channel.executeThenClose { inbound, _ in
                var splitter = LineSplitter(limit: maximumLine)
                for try await chunk in inbound {
                    // Every request one read brought is answered in one visit to the node (in order).
                    let items = splitter.add(chunk.readableBytesView)
                    if !items.isEmpty { await node.handleControl(items, on: connection) }
                }
                await node.connectionClosed(connection)
                connection.outbox.close()
                // Every reply is out (and the node's side half-closed) before the channel closes.
                try await ChannelPump.awaitDrain(written, closing: channel.channel)
            }
        } catch {
            await node.connectionClosed(connection)
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
