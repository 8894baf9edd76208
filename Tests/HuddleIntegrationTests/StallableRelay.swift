import Foundation
import Testing

/// A loopback relay in front of one node: the node advertises the relay's port (`--advertise`),
/// and TCP connections and UDP datagrams sent there are carried to the node's real port (and the
/// answers back). `stall()` stops the TCP bytes in both directions while UDP keeps flowing, so the
/// node stays alive for SWIM (probes and acks are UDP) while nothing crosses its links — what a
/// SIGSTOP cannot do: a stopped member is declared failed within ~3 s, and a failed member no
/// longer holds anything back.
///
/// Every link between two nodes is dialed to the other's advertised address, so when each node of
/// a test sits behind a relay, stalling the relays stalls every link, whoever dialed it.
///
/// The relay also counts what crosses it (TCP bytes, and each datagram's size, by direction),
/// and keeps the TCP bytes when made `recording`: what a test checks crossed the wire is counted
/// by the test itself, not by the node. `admitOnly(_:)` holds back (as a stall does) every new
/// connection not made by one of the given processes, so a test can keep one member from reaching
/// another while the rest talk.
final class StallableRelay: @unchecked Sendable {
    // @unchecked: every mutable field is guarded by `lock`; the fds are owned by the threads below.
    let port: Int
    private let listener: Int32
    private let udp: Int32
    private let lock = NSLock()
    private var target: UInt16 = 0
    private var stalled: Set<Direction> = []
    private var closed = false
    /// TCP pumps (one per direction of each connection): their direction, the process that dialed
    /// their connection (when the relay identifies dialers), and whether each is parked by a stall.
    private var pumps: [Int: (direction: Direction, dialer: pid_t?, parked: Bool)] = [:]
    /// Connections dialed by these processes are stalled (both directions), whatever `stalled` says.
    private var stalledDialers: Set<pid_t> = []
    private let identifyDialers: Bool
    private var nextPump = 0
    private var connections: [Int32] = []
    private let recording: Bool
    private var tcpBytes: [Direction: Int] = [:]
    private var recorded: [UInt8] = []
    private var datagramSizes: [Direction: [Int]] = [:]
    /// When set, connections from any other process are held (their pumps park) until `admitAll`.
    private var admitted: Set<pid_t>?
    /// `handOver()`: the loops end without closing the listening and datagram sockets.
    private var keepSockets = false
    private var loopsRunning = 2

    /// `identifyDialers`: find the process that dialed each connection (through /proc), so that
    /// `stall(dialedBy:)` can stall some connections and not others.
    init(recording: Bool = false, identifyDialers: Bool = false) throws {
        self.recording = recording
        self.identifyDialers = identifyDialers
        var made: (Int32, Int32, Int)?
        for _ in 0..<32 {
            let tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var one: Int32 = 1
            setsockopt(tcp, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            guard Self.bind(tcp, port: 0), listen(tcp, 64) == 0 else { Glibc.close(tcp); continue }
            let port = Self.localPort(tcp)
            let dgram = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            if Self.bind(dgram, port: UInt16(port)) {
                made = (tcp, dgram, port)
                break
            }
            Glibc.close(dgram)
            Glibc.close(tcp)
        }
        guard let (tcp, dgram, port) = made else { throw TestTimeout(description: "relay: no loopback port free for both TCP and UDP") }
        listener = tcp
        udp = dgram
        self.port = port
        Thread { [self] in acceptLoop() }.start()
        Thread { [self] in datagramLoop() }.start()
    }

    var addr: String { "127.0.0.1:\(port)" }

    /// Where the node really listens. Connections that arrive before it is set wait for it.
    func setTarget(_ port: Int) { lock.withLock { target = UInt16(port) } }

    /// Which way TCP bytes go through the relay: to the node behind it, or from it.
    enum Direction: Sendable { case towardNode, fromNode }

    /// Stops carrying TCP bytes in `directions` (both by default); returns once no pump of those
    /// directions is between a read and its write (so nothing crosses after it returns), or throws
    /// if a pump stays stuck in a write for `seconds`.
    func stall(_ directions: Set<Direction> = [.towardNode, .fromNode], within seconds: Double = 30) async throws {
        lock.withLock { stalled = directions }
        let deadline = ContinuousClock.now + .seconds(seconds)
        while lock.withLock({ pumps.values.contains { directions.contains($0.direction) && !$0.parked } }) {
            guard ContinuousClock.now < deadline else { throw TestTimeout(description: "relay \(port): a pump did not park within \(seconds) s") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func resume() {
        lock.withLock {
            stalled = []
            stalledDialers = []
        }
    }

    /// Stops carrying TCP bytes, both ways, on every connection dialed by one of `pids` (now and
    /// later ones; the relay must identify dialers), and on every one whose dialer it could not
    /// identify, until `resume()`; returns once their pumps are parked, as `stall` does.
    func stall(dialedBy pids: Set<pid_t>, within seconds: Double = 30) async throws {
        precondition(identifyDialers, "stall(dialedBy:) needs a relay made with identifyDialers")
        lock.withLock { stalledDialers = pids }
        let deadline = ContinuousClock.now + .seconds(seconds)
        while lock.withLock({ pumps.values.contains { ($0.dialer.map(pids.contains) ?? true) && !$0.parked } }) {
            guard ContinuousClock.now < deadline else { throw TestTimeout(description: "relay \(port): a pump did not park within \(seconds) s") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// From now on, a new connection whose dialing process is not among `pids` (found through
    /// /proc: the socket at the other end of the connection, and the process holding it) is held:
    /// accepted, but nothing crosses it until `admitAll()`. Connections already relayed go on.
    func admitOnly(_ pids: Set<pid_t>) { lock.withLock { admitted = pids } }

    /// Lets every held connection go on, and admits every new one.
    func admitAll() { lock.withLock { admitted = nil } }

    /// Each relayed connection's pumps, for failure messages: direction, dialer, parked.
    var pumpStates: String { lock.withLock { pumps.values.map { "\($0.direction)/\($0.dialer.map(String.init) ?? "?")/\($0.parked ? "parked" : "running")" }.sorted().joined(separator: " ") } }

    /// TCP bytes carried so far, both directions.
    var bytesRelayed: Int { lock.withLock { tcpBytes.values.reduce(0, +) } }

    /// Every TCP byte carried so far, in both directions, in the order carried (only when made
    /// `recording`).
    var capturedBytes: [UInt8] { lock.withLock { recorded } }

    /// The size of each datagram carried in `direction` so far, in order.
    func datagrams(_ direction: Direction) -> [Int] { lock.withLock { datagramSizes[direction] ?? [] } }

    /// Ends every relayed connection and stops the threads. (The fds are shut down under the lock:
    /// a pump takes its fds out of `connections` before they are closed, so none is reused yet.)
    func close() {
        lock.withLock {
            closed = true
            for fd in connections { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// Stops relaying (every relayed connection ends) and hands the relay's address over as its
    /// two bound sockets, TCP (listening) and UDP, never closed in between: no other process can
    /// take the port while the node behind the relay dies and the test takes over its address.
    func handOver(within seconds: Double = 30) async throws -> (tcp: Int32, udp: Int32) {
        lock.withLock {
            keepSockets = true
            closed = true
            for fd in connections { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        let deadline = ContinuousClock.now + .seconds(seconds)
        while lock.withLock({ loopsRunning > 0 }) {
            guard ContinuousClock.now < deadline else { throw TestTimeout(description: "relay \(port): its loops did not end within \(seconds) s") }
            try await Task.sleep(for: .milliseconds(5))
        }
        return (listener, udp)
    }

    // MARK: TCP

    private func acceptLoop() {
        defer {
            lock.withLock {
                if !keepSockets { Glibc.close(listener) }
                loopsRunning -= 1
            }
        }
        while !lock.withLock({ closed }) {
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            Thread { [self] in connect(client) }.start()
        }
    }

    private func connect(_ client: Int32) {
        // Wait (bounded) for the node's real port: a node may be dialed before the test read it.
        let deadline = Date().addingTimeInterval(30)
        var port: UInt16 = 0
        while port == 0 && Date() < deadline && !lock.withLock({ closed }) {
            port = lock.withLock { target }
            if port == 0 { usleep(5000) }
        }
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port)
        let ok = port != 0 && withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
        guard ok else {
            Glibc.close(upstream)
            Glibc.close(client)
            return
        }
        let pair = Pair(client, upstream)
        let admitting = lock.withLock { admitted }
        let dialer = identifyDialers || admitting != nil ? Self.dialer(of: client) : nil
        let held = admitting.map { !$0.contains(dialer ?? -1) } ?? false
        lock.withLock { connections += [client, upstream] }
        Thread { [self] in pump(from: client, to: upstream, .towardNode, pair, held: held, dialer: dialer) }.start()
        Thread { [self] in pump(from: upstream, to: client, .fromNode, pair, held: held, dialer: dialer) }.start()
    }

    /// The two fds of one relayed connection, closed by whichever pump ends last.
    private final class Pair: @unchecked Sendable {
        let a: Int32, b: Int32
        private let lock = NSLock()
        private var running = 2
        init(_ a: Int32, _ b: Int32) { self.a = a; self.b = b }
        func end() {
            shutdown(a, Int32(SHUT_RDWR))
            shutdown(b, Int32(SHUT_RDWR))
            let last = lock.withLock { running -= 1; return running == 0 }
            if last { Glibc.close(a); Glibc.close(b) }
        }
    }

    private func pump(from source: Int32, to destination: Int32, _ direction: Direction, _ pair: Pair, held: Bool, dialer: pid_t?) {
        let id = lock.withLock {
            nextPump += 1
            pumps[nextPump] = (direction, dialer, false)
            return nextPump
        }
        /// Whether this pump must not carry bytes now (called under the lock).
        func parkedNow() -> Bool {
            // A connection whose dialer was not identified is stalled too while some dialers are:
            // it may be one of theirs (a cut-off member must not slip through an unread /proc row).
            stalled.contains(direction) || (held && admitted != nil)
                || (stalledDialers.isEmpty ? false : dialer.map(stalledDialers.contains) ?? true)
        }
        defer {
            lock.withLock {
                pumps[id] = nil
                connections.removeAll { $0 == source || $0 == destination }
            }
            pair.end()
        }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let (isClosed, isStalled) = lock.withLock { () -> (Bool, Bool) in
                let parked = parkedNow()
                pumps[id] = (direction, dialer, parked)
                return (closed, parked)
            }
            if isClosed { return }
            if isStalled {
                usleep(5000)
                continue
            }
            var poller = pollfd(fd: source, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 20) > 0 else { continue }
            // A stall that began during the poll wins: this pump parks before reading.
            if lock.withLock({ parkedNow() }) { continue }
            let n = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard n > 0 else { return }
            var sent = 0
            while sent < n {
                let m = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + sent, n - sent) }
                guard m > 0 else { return }
                sent += m
            }
            lock.withLock {
                tcpBytes[direction, default: 0] += n
                if recording { recorded += buffer[..<n] }
            }
        }
    }

    /// The process that dialed the connection accepted as `fd`: the socket at its other end (its
    /// local port is this connection's peer port) in /proc/net/tcp, and the process holding that
    /// socket's inode among its fds. Nil when not found.
    private static func dialer(of fd: Int32) -> pid_t? {
        var peer = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) } }
        let local = String(format: "0100007F:%04X", Int(UInt16(bigEndian: peer.sin_port)))
        guard let table = readWhole("/proc/net/tcp"),
              let row = table.split(separator: "\n").map({ $0.split(separator: " ") }).first(where: { $0.count > 9 && $0[1] == local }) else { return nil }
        let socket = "socket:[\(row[9])]"
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { continue }
            for fd in fds where (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) == socket { return pid }
        }
        return nil
    }

    /// The whole of a /proc file: read until the end (a single read, as `String(contentsOfFile:)`
    /// makes of a file whose size shows as 0, stops at the first page: /proc/net/tcp is longer).
    private static func readWhole(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            out += buffer[..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: UDP

    /// Datagrams from a client go out from a socket of their own (one per client address), so the
    /// node's answers (sent to the datagram's source) come back to that socket and go to that client.
    private func datagramLoop() {
        var outbound: [String: Int32] = [:]
        var clients: [Int32: sockaddr_in] = [:]
        defer {
            for fd in outbound.values { Glibc.close(fd) }
            lock.withLock {
                if !keepSockets { Glibc.close(udp) }
                loopsRunning -= 1
            }
        }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !lock.withLock({ closed }) {
            var pollers = [pollfd(fd: udp, events: Int16(POLLIN), revents: 0)] + outbound.values.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&pollers, nfds_t(pollers.count), 50) > 0 else { continue }
            let port = lock.withLock { target }
            for p in pollers where p.revents & Int16(POLLIN) != 0 {
                var from = sockaddr_in()
                var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                let n = buffer.withUnsafeMutableBytes { raw in
                    withUnsafeMutablePointer(to: &from) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(p.fd, raw.baseAddress, raw.count, 0, $0, &length) }
                    }
                }
                guard n > 0 else { continue }
                if p.fd == udp {
                    guard port != 0 else { continue }  // the node's port is not known yet: lost, as UDP may be
                    lock.withLock { datagramSizes[.towardNode, default: []].append(n) }
                    let key = "\(from.sin_addr.s_addr):\(from.sin_port)"
                    let fd: Int32
                    if let known = outbound[key] {
                        fd = known
                    } else {
                        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
                        guard Self.bind(fd, port: 0) else { Glibc.close(fd); continue }
                        outbound[key] = fd
                        clients[fd] = from
                    }
                    var to = Self.loopback(port)
                    _ = buffer.withUnsafeBytes { raw in
                        withUnsafePointer(to: &to) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, raw.baseAddress, n, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                        }
                    }
                } else if var client = clients[p.fd] {
                    lock.withLock { datagramSizes[.fromNode, default: []].append(n) }
                    _ = buffer.withUnsafeBytes { raw in
                        withUnsafePointer(to: &client) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(udp, raw.baseAddress, n, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                        }
                    }
                }
            }
        }
    }

    // MARK: sockets

    private static func loopback(_ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    private static func bind(_ fd: Int32, port: UInt16) -> Bool {
        var address = loopback(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    private static func localPort(_ fd: Int32) -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

extension TestCluster {
    /// Starts a node that advertises a fresh `StallableRelay` in front of its real port (read from
    /// its log as soon as it is written, so peers are relayed from the start).
    /// `relay`: one the test made (recording, or admitting only some processes), else a fresh one.
    func startBehindRelay(_ name: String, join: [String]? = nil, key: String? = nil, extra: [String] = [],
                          relay given: StallableRelay? = nil) async throws -> (TestNode, StallableRelay) {
        let relay = try given ?? StallableRelay()
        let log = "\(dir)/\(name).log"
        // The slot first: the watcher's deadline must not run out while `start` waits for one (a
        // full suite once made it wait past 120 s, and the test failed with the port in the log).
        await reserveSlot()
        let watcher = Task { () -> Int? in
            let deadline = ContinuousClock.now + .seconds(120)
            while ContinuousClock.now < deadline {
                if let text = try? String(contentsOfFile: log, encoding: .utf8), let range = text.range(of: " listening on 127.0.0.1:") {
                    let digits = text[range.upperBound...].prefix { $0.isNumber }
                    if let port = Int(digits) { return port }
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return nil
        }
        let node: TestNode
        do {
            node = try await start(name, join: join, key: key, extra: ["--advertise", relay.addr] + extra)
        } catch {
            watcher.cancel()
            relay.close()
            throw error
        }
        guard let port = await watcher.value else {
            relay.close()
            throw TestTimeout(description: "\(name) never logged its listen port: \(node.log)")
        }
        relay.setTarget(port)
        #expect(node.addr == relay.addr, "\(name) advertises its relay")
        return (node, relay)
    }
}
