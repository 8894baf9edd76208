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
final class StallableRelay: @unchecked Sendable {
    // @unchecked: every mutable field is guarded by `lock`; the fds are owned by the threads below.
    let port: Int
    private let listener: Int32
    private let udp: Int32
    private let lock = NSLock()
    private var target: UInt16 = 0
    private var stalled: Set<Direction> = []
    private var closed = false
    /// TCP pumps (one per direction of each connection): their direction, and whether each is
    /// parked by a stall.
    private var pumps: [Int: (direction: Direction, parked: Bool)] = [:]
    private var nextPump = 0
    private var connections: [Int32] = []

    init() throws {
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

    func resume() { lock.withLock { stalled = [] } }

    /// Ends every relayed connection and stops the threads. (The fds are shut down under the lock:
    /// a pump takes its fds out of `connections` before they are closed, so none is reused yet.)
    func close() {
        lock.withLock {
            closed = true
            for fd in connections { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    // MARK: TCP

    private func acceptLoop() {
        defer { Glibc.close(listener) }
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
        lock.withLock { connections += [client, upstream] }
        Thread { [self] in pump(from: client, to: upstream, .towardNode, pair) }.start()
        Thread { [self] in pump(from: upstream, to: client, .fromNode, pair) }.start()
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

    private func pump(from source: Int32, to destination: Int32, _ direction: Direction, _ pair: Pair) {
        let id = lock.withLock {
            nextPump += 1
            pumps[nextPump] = (direction, false)
            return nextPump
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
                let parked = stalled.contains(direction)
                pumps[id] = (direction, parked)
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
            if lock.withLock({ stalled.contains(direction) }) { continue }
            let n = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard n > 0 else { return }
            var sent = 0
            while sent < n {
                let m = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + sent, n - sent) }
                guard m > 0 else { return }
                sent += m
            }
        }
    }

    // MARK: UDP

    /// Datagrams from a client go out from a socket of their own (one per client address), so the
    /// node's answers (sent to the datagram's source) come back to that socket and go to that client.
    private func datagramLoop() {
        var outbound: [String: Int32] = [:]
        var clients: [Int32: sockaddr_in] = [:]
        defer {
            Glibc.close(udp)
            for fd in outbound.values { Glibc.close(fd) }
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
    func startBehindRelay(_ name: String, join: [String]? = nil, extra: [String] = []) async throws -> (TestNode, StallableRelay) {
        let relay = try StallableRelay()
        let log = "\(dir)/\(name).log"
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
            node = try await start(name, join: join, extra: ["--advertise", relay.addr] + extra)
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
