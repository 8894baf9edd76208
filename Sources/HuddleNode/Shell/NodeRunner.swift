import Logging
import Foundation
import HuddleCore
import HuddleCrypto
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Starts a node from its configuration and runs it until `leave`, SIGINT or SIGTERM.
public enum NodeRunner {
    /// Runs the node in the foreground. Throws `NodeError` (one line) when it cannot start.
    public static func run(_ config: NodeConfiguration) async throws {
        try ProcessHardening.apply()
        let sessionKey: SessionKey
        do { sessionKey = try SessionKey.load(from: config.keyPath) } catch { throw NodeError("\(error)") }

        let control = try await ControlServer.bind(path: config.controlPath)
        var cleanup: [() -> Void] = [{ unlink(config.controlPath) }]
        defer { for step in cleanup.reversed() { step() } }

        let tcp: NIOAsyncChannel<FrameChannel, Never>, udp: UDPSocket, port: Int
        do {
            (tcp, udp, port) = try await bindLinkPorts(config)
        } catch {
            try? await control.channel.close()
            throw error
        }

        let dataDir = try prepareDataDirectory(config.dataDir)
        // With --data-dir the node keeps its membership there (CONTROL.md, Restart); without, a
        // temporary directory is removed on exit.
        if config.dataDir == nil { cleanup.append { try? FileManager.default.removeItem(atPath: dataDir.path) } }
        let state = try config.dataDir.map { dir throws(NodeError) in try NodeStateStore.open(directory: dir) }
        var notes: [String] = state?.damage.map { [$0] } ?? []
        var loaded = try state?.store.load()
        let identity: Identity
        do {
            (identity, loaded) = try loadIdentity(config, dataDir: config.dataDir, loaded: loaded, notes: &notes)
        } catch {
            throw NodeError("\(error)")
        }
        // A new member here (first run, damage set aside, a member that left): nothing old remains.
        if let state, loaded == nil { try state.store.reset() }

        let advertise = config.advertise ?? "\(advertisedHost(config.listenHost, bound: tcp.channel.localAddress)):\(port)"
        let name = config.name ?? ProcessInfo.processInfo.hostName
        // Peers refuse a record above these bounds or with a hostname: refused here, in one line.
        if let problem = MemberInfo.ownRecordProblem(name: name, addr: advertise) {
            udp.close()
            try? await tcp.channel.close()
            try? await control.channel.close()
            throw NodeError("cannot run: \(problem)")
        }
        // A resumed member comes back as itself, at an incarnation above any it signed.
        let local = MemberInfo(id: loaded?.point.member ?? MemberID(raw: SecureRandom.uint64()), node: identity.publicKey, name: name, addr: advertise,
                               incarnation: loaded.map { min($0.point.incarnation &+ SessionCore.resumeIncarnationMargin, WireReader.madeCountLimit) } ?? 0)
        let store: ChunkStore
        do { store = try ChunkStore(dataDirectory: dataDir.path) } catch {
            throw NodeError("cannot create the chunk store in \(dataDir.path): \(error.localizedDescription)")
        }
        let metricsServer: MetricsServer?
        if let address = config.metrics {
            do {
                let (host, port) = try NodeConfiguration.parseListen(address)
                metricsServer = try await MetricsServer.bind(host: host, port: port)
            } catch {
                udp.close()
                try? await tcp.channel.close()
                try? await control.channel.close()
                throw error
            }
        } else {
            metricsServer = nil
        }
        let node = Node(local: local, security: LinkSecurity(sessionKey: sessionKey, identity: identity), config: config, store: store,
                        metrics: metricsServer == nil ? nil : NodeMetrics(), resume: loaded)
        await node.setPunchSource(tcp.channel.localAddress)
        for note in notes { node.log.warning("\(note)") }
        node.log.info("member \(local.id) of session \(sessionKey.fingerprint) listening on \(config.listenHost):\(port) (advertised \(advertise)), control \(config.controlPath)\(loaded != nil ? ", resumed from \(dataDir.path)" : "")")
        if let metricsServer { node.log.info("serving metrics at http://\(metricsServer.address)/metrics") }
        if let state {
            await node.persist(to: state.store)
            // Before anything is served or imported: the store against the journal taken up.
            if node.resumed { await node.recoverStore(deleteUnknown: loaded?.point.journal != nil) }
            // Only a member that leaves for good wipes its state (and its chunks, and an identity it made here).
            cleanup.append {
                guard node.leftForGood.withLock({ $0 }) else { return }
                // After the writes the node handed to its I/O queue (none runs on after this).
                node.io.blockingRun { state.store.wipe() }
                store.removeAll()
                if config.identityPath == nil { unlink(dataDir.path + "/identity") }
            }
        } else {
            cleanup.append { store.removeAll() }
        }

        let known = loaded?.point.addresses ?? []
        // SIGTERM and SIGINT are a graceful shutdown (swift-service-lifecycle): hand off, then leave
        // (with a data directory: stop, keeping the membership).
        let service = NodeService(node: node) {
            await runUntilStopped(node, config: config, tcp: tcp, udp: udp, control: control, metrics: metricsServer, known: known)
        }
        // The node returns once it has left (by `leave` or a signal): that ends the group, normally.
        let entry = ServiceGroupConfiguration.ServiceConfiguration(service: service, successTerminationBehavior: .gracefullyShutdownGroup)
        let group = ServiceGroup(configuration: .init(services: [entry], gracefulShutdownSignals: [.sigterm, .sigint], logger: node.log))
        do { try await group.run() } catch { throw NodeError("\(error)") }
        node.log.info("stopped")
    }

    /// How long the node's tasks may take to end after it stopped before the process exits anyway.
    static let exitBackstop: Duration = .seconds(20)

    /// Runs links, datagrams, the control socket and the timer until the node has left.
    /// `known`: where a resumed member last found the session.
    private static func runUntilStopped(_ node: Node, config: NodeConfiguration, tcp: NIOAsyncChannel<FrameChannel, Never>, udp: UDPSocket,
                                        control: ControlServer.ServerChannel, metrics: MetricsServer?, known: [String]) async {
        let backstop = Mutex<Task<Void, Never>?>(nil)
        defer { backstop.withLock { $0?.cancel() } }  // every task ended: no backstop
        await withDiscardingTaskGroup { group in
            group.addTask { await node.spawner.run() }
            if let metrics, let series = node.metrics { group.addTask { await metrics.run(node, metrics: series) } }
            group.addTask { await DatagramTransport.run(udp, node: node) }
            group.addTask {
                try? await tcp.executeThenClose { inbound in
                    let gate = HandshakeGate(perAddress: config.handshakesPerAddress, total: config.handshakesInAll)
                    for try await connection in inbound {
                        let source = connection.channel.remoteAddress?.ipAddress ?? "unknown"
                        switch gate.enter(source) {
                        case let .admitted(ticket):
                            node.spawner.spawn { await LinkSession.run(connection, role: .responder, node: node, registered: nil, ticket: ticket) }
                        case let .refused(firstRefusal):
                            // Closed unread; executeThenClose finishes the writer, as NIO requires.
                            node.spawner.spawn { try? await connection.executeThenClose { _, _ in } }
                            if firstRefusal {
                                node.log.warning("refusing connections from \(source): \(gate.inProgress(from: source)) handshakes from it already in progress (at most \(gate.perAddress), \(gate.total) in all)")
                            }
                        }
                    }
                }
            }
            group.addTask {
                try? await control.executeThenClose { inbound in
                    for try await connection in inbound {
                        node.spawner.spawn { await ControlServer.serve(connection, node: node) }
                    }
                }
            }
            // The first tick arms the timer; from then on the core says when it next has work
            // (`SessionShell.rearm`, `Node.armTimer`): no polling.
            await node.tick()
            if node.resumed {
                let addresses = (config.join + known).reduce(into: [String]()) { if !$0.contains($1) && $1 != node.local.addr { $0.append($1) } }
                if !addresses.isEmpty { node.spawner.spawn { await joinInBackground(addresses, node: node) } }
            } else {
                for addr in config.join {
                    node.spawner.spawn { await joinInBackground([addr], node: node) }
                }
            }
            SystemdNotify.send("READY=1")
            await node.waitUntilStopped()
            // Let replies to `leave` reach their clients, then stop everything.
            try? await Task.sleep(for: .milliseconds(100))
            group.cancelAll()
            tcp.channel.close(promise: nil)
            control.channel.close(promise: nil)
            metrics?.close()
            node.datagramOutbox.close()
            node.spawner.finish()
            // Every task above ends on its own once the node has stopped (waits end, links and
            // connections are closed within bounds). A backstop for one that does not: say so and
            // exit, rather than hang a stop for good.
            backstop.withLock { $0 = Task.detached {
                guard (try? await Task.sleep(for: exitBackstop)) != nil else { return }
                let open = await node.links.count
                node.log.error("tasks still running \(exitBackstop) after the node stopped (\(open) links open): exiting anyway")
                exit(1)
            } }
        }
    }

    /// Pairs with the member at `addr` by invitation `code` and writes the session key it hands
    /// over to `keyOut` (mode 0600; an existing file is refused before anything crosses the
    /// network). Returns the session's fingerprint. Errors are one line (`NodeError`, `CryptoError`).
    public static func pair(code text: String, with addr: String, keyOut: String) async throws -> String {
        try ProcessHardening.apply()
        let code: InvitationCode
        do { code = try InvitationCode.parse(text) } catch { throw NodeError("\(error)") }
        guard access(keyOut, F_OK) != 0 else { throw NodeError("\(keyOut) exists; pairing never overwrites a key file (choose another --key-out)") }
        let key = try await PairingSession.join(addr: addr, nameplate: code.nameplate, password: Array(code.text.utf8))
        do { try key.write(to: keyOut) } catch { throw NodeError("cannot write the session key to \(keyOut): \(error)") }
        return key.fingerprint
    }

    /// Keeps dialing `addresses` in turn (backing off to 5 s after each round) until a link to
    /// one of them is up and a join push-pull over it has been answered: a `--join` address (one
    /// task each), or every address a resumed member knew. A hostname is looked up once, off the
    /// node's actor (`PeerAddress`), and again only if that fails.
    static func joinInBackground(_ addresses: [String], node: Node) async {
        var delay = 0.25
        var resolved: [String: String] = [:]
        while !Task.isCancelled, await !node.stopping {
            for addr in addresses {
                do {
                    if resolved[addr] == nil { resolved[addr] = try await PeerAddress.resolveUserAddress(addr) }
                    let peer = try await node.link(to: resolved[addr] ?? addr)
                    guard await node.pushPullAndWait(peer, join: true) else { throw NodeError("the link to \(addr) closed before its member answered") }
                    node.log.info("\(node.resumed ? "back in" : "joined") the session through \(addr)")
                    await node.joinAnswered(addresses)
                    return
                } catch {
                    node.log.info("join \(addr) failed: \(error)")
                    await node.joinFailed(addr, error: "\(error)")
                }
            }
            try? await Task.sleep(for: .seconds(delay))
            delay = min(delay * 2, 5)
        }
    }

    /// The node's identity: `--identity`, else with a data directory its `identity` file (made
    /// there on the first run), else a new one. A damaged identity file in the data directory is
    /// moved aside and a new member starts (`loaded` is dropped: the others pin the old key).
    private static func loadIdentity(_ config: NodeConfiguration, dataDir: String?, loaded: NodeStateStore.Loaded?, notes: inout [String]) throws -> (Identity, NodeStateStore.Loaded?) {
        if let path = config.identityPath { return (try Identity.loadOrCreate(path: path), loaded) }
        guard let dataDir else { return (Identity.generate(), loaded) }
        let path = dataDir + "/identity"
        do {
            return (try Identity.loadOrCreate(path: path), loaded)
        } catch {
            let aside = "\(path).damaged-\(Int(Date().timeIntervalSince1970))"
            rename(path, aside)
            notes.append("\(error); moved to \(aside), starting as a new member with a new identity")
            return (try Identity.loadOrCreate(path: path), nil)
        }
    }

    private static func prepareDataDirectory(_ path: String?) throws -> (path: String, created: Bool) {
        let fm = FileManager.default
        if let path {
            if fm.fileExists(atPath: path) { return (path, false) }
            do { try fm.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) } catch {
                throw NodeError("cannot create data directory \(path): \(error.localizedDescription)")
            }
            return (path, true)
        }
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        var template = Array("\(base)/huddle-data-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw NodeError("cannot create a temporary data directory under \(base)") }
        return (String(cString: made), true)
    }

    /// The host other members reach this node at: the address the listener is bound to (numeric
    /// even when `--listen` named a host), or for a wildcard listener the first IPv4 address of a
    /// device that is not loopback.
    private static func advertisedHost(_ listenHost: String, bound: SocketAddress?) -> String {
        guard listenHost == "0.0.0.0" || listenHost == "::" else {
            guard let bound, let ip = bound.ipAddress else { return listenHost }
            if case .v6 = bound { return "[\(ip)]" }
            return ip
        }
        let devices = (try? System.enumerateDevices()) ?? []
        for device in devices {
            guard let address = device.address, case .v4 = address, let ip = address.ipAddress, !ip.hasPrefix("127.") else { continue }
            return ip
        }
        return "127.0.0.1"
    }

    /// The TCP listener for links and the UDP socket on the same port. With port 0 the kernel picks
    /// a TCP port, and UDP must then get the same number; another process may hold it for UDP, so
    /// a busy UDP port means trying another TCP port (32 tries).
    private static func bindLinkPorts(_ config: NodeConfiguration) async throws -> (NIOAsyncChannel<FrameChannel, Never>, UDPSocket, Int) {
        var attempts = config.listenPort == 0 ? 32 : 1
        while true {
            attempts -= 1
            let tcp: NIOAsyncChannel<FrameChannel, Never>
            do {
                tcp = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .childChannelOption(.allowRemoteHalfClosure, value: true)
                    .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                    .bind(host: config.listenHost, port: config.listenPort) { channel in
                        channel.eventLoop.makeCompletedFuture { try LinkSession.wrap(channel) }
                    }
            } catch {
                throw NodeError("cannot listen on \(config.listenHost):\(config.listenPort) (TCP): \(error)")
            }
            let port = tcp.channel.localAddress?.port ?? config.listenPort
            do {
                // Set after the bind, so another socket without it cannot share the port: a hole
                // punch's dial leaves from this port (`Node+Punch`), and needs it on both.
                try await tcp.channel.setOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
                return (tcp, try DatagramTransport.bind(host: config.listenHost, port: port), port)
            } catch {
                try? await tcp.channel.close()
                guard attempts > 0 else { throw NodeError("cannot listen on \(config.listenHost):\(port) (UDP): \(error)") }
            }
        }
    }
}

/// The node as a swift-service-lifecycle `Service`: `run` returns once the node has left; a
/// graceful shutdown (SIGTERM, SIGINT) hands off what only this member holds, then leaves — or,
/// with a data directory, stops and keeps the membership.
struct NodeService: Service {
    let node: Node
    let body: @Sendable () async -> Void

    func run() async throws {
        await withGracefulShutdownHandler {
            await body()
        } onGracefulShutdown: { [node] in
            SystemdNotify.send("STOPPING=1")
            Task {
                // With a data directory a signal stops the node and keeps its membership (CONTROL.md, Restart).
                if await node.state != nil {
                    await node.stop()
                } else {
                    _ = await node.handOff(.signal)
                    await node.leave()
                }
            }
        }
    }
}
