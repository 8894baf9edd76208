import Foundation
import HuddleControl
import HuddleTestSupport
import Synchronization
import Testing

/// Joins go through the shared shell's one dial per address (issue 35): a `join` to an address
/// already being dialed waits for that dial instead of making a second, ends with it, and a stop
/// ends every join still waiting. The address is a TCP listener that accepts and never answers,
/// so each dial lasts until the node's handshake timeout.
@Suite(.timeLimit(.minutes(5)))
struct JoinWaitProcessTests {
    @Test func twoJoinsToOneAddressShareOneDialAndBothEndWithIt() async throws {
        let silent = try SilentListener()
        defer { silent.close() }
        let cluster = try TestCluster("joinwait")
        defer { cluster.shutdown() }
        // Long enough that the second join reaches the node while the first one's dial is in flight.
        let a = try await cluster.start("a", extra: ["--handshake-timeout-seconds", "8"])
        let first = try await a.client(), second = try await a.client()
        let started = ContinuousClock.now
        let joins = [first, second].map { client in
            Task { () -> String in
                do {
                    _ = try await client.ask("join", ["addr": .string(silent.addr)])
                    return "joined"
                } catch let error as ControlError {
                    return "\(error.code)"
                }
            }
        }
        var outcomes: [String] = []
        for join in joins { outcomes.append(try await join.value) }
        let waited = ContinuousClock.now - started
        print("join wait: \(outcomes) after \(waited); the listener accepted \(silent.accepted) connection(s)")
        #expect(outcomes == ["unavailable", "unavailable"], "both joins fail with the one dial: \(outcomes)")
        #expect(silent.accepted == 1, "one dial for both joins, \(silent.accepted) connections\n\(cluster.logs)")
        #expect(waited >= .seconds(7), "the joins ended with the dial's handshake timeout, not before: \(waited)")
        await first.close()
        await second.close()
    }

    @Test func aStopEndsEveryJoinWaitingForADial() async throws {
        let silent = try SilentListener()
        defer { silent.close() }
        let cluster = try TestCluster("joinstop")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a", extra: ["--handshake-timeout-seconds", "600"])
        let clients = [try await a.client(), try await a.client()]
        let joins = clients.map { client in
            Task { () -> Bool in (try? await client.ask("join", ["addr": .string(silent.addr)])) != nil }
        }
        try await eventually("a to dial the silent listener") { silent.accepted >= 1 }
        a.kill()
        let status = try await a.waitForExit(within: 30)
        #expect(status == 0 && !a.log.contains("exiting anyway"), "a exited with \(status); its log ends: \(a.log.split(separator: "\n").suffix(10).joined(separator: "\n"))")
        // Each join ended with the node (an error reply or its connection closed), none as joined.
        for join in joins { #expect(await join.value == false) }
        #expect(silent.accepted == 1, "one dial for both joins, \(silent.accepted) connections")
        for client in clients { await client.close() }
    }
}

/// A loopback TCP listener that accepts connections, counts them and never sends a byte (a peer
/// whose handshake never comes). Connections stay open until `close`.
final class SilentListener: Sendable {
    let addr: String
    private let fd: Int32
    private let state = Mutex<(accepted: Int, connections: [Int32], closed: Bool)>((0, [], false))

    init() throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestTimeout(description: "no TCP socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = fd
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 16) == 0 else {
            Glibc.close(fd)
            throw TestTimeout(description: "cannot listen on loopback")
        }
        addr = "127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    var accepted: Int { state.withLock { $0.accepted } }

    private func acceptLoop() {
        while true {
            let connection = accept(fd, nil, nil)
            guard connection >= 0 else { return }
            let keep = state.withLock { state -> Bool in
                guard !state.closed else { return false }
                state.accepted += 1
                state.connections.append(connection)
                return true
            }
            if !keep { Glibc.close(connection); return }
        }
    }

    func close() {
        let connections = state.withLock { state -> [Int32] in
            state.closed = true
            return state.connections
        }
        // Shutting the listening socket down wakes the blocked accept, which then returns.
        shutdown(fd, Int32(SHUT_RDWR))
        Glibc.close(fd)
        for connection in connections { Glibc.close(connection) }
    }
}
