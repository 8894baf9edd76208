import Foundation
import HuddleControl
import NIOCore
import NIOPosix

/// `diagnose`'s reachability checks of one advertised address, each bounded by its timeout.
///
/// TCP: a connection to the listen port, closed at once (what a member does before its link
/// handshake). UDP has no handshake: an empty datagram goes to the port on a connected socket, and
/// an ICMP "port unreachable" coming back (ECONNREFUSED) is a sure "no"; silence is reported as
/// `answered: false`, not as reachable (a member that answers SWIM's datagrams is heard, which the
/// report's `last_heard_ms` shows). Only numeric addresses are probed (`PeerAddress`): nothing is
/// looked up.
enum AddressProbe {
    /// What one probe found.
    struct Outcome: Sendable {
        /// TCP connected, or UDP was not refused.
        var reachable: Bool
        /// How long the TCP connection took, in milliseconds.
        var milliseconds: Int?
        /// Why not, in words (`connection refused`, `timed out after 1500 ms`, …).
        var error: String?

        var json: JSON {
            .object(["ok": .bool(reachable), "ms": milliseconds.map { .int(Int64($0)) } ?? .null, "error": error.map { .string($0) } ?? .null])
        }
    }

    static func tcp(_ addr: String, timeout: TimeAmount) async -> Outcome {
        guard let address = PeerAddress.socketAddress(addr) else { return Outcome(reachable: false, error: "not a numeric host:port") }
        let start = ContinuousClock.now
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(timeout)
                .connect(to: address).get()
            let elapsed = ContinuousClock.now - start
            try? await channel.close()
            return Outcome(reachable: true, milliseconds: Int(elapsed / .milliseconds(1)))
        } catch let error as IOError where error.errnoCode == ECONNREFUSED {
            return Outcome(reachable: false, error: "connection refused")
        } catch is ChannelError {
            return Outcome(reachable: false, error: "no answer within \(timeout.nanoseconds / 1_000_000) ms")
        } catch {
            let text = "\(error)"
            return Outcome(reachable: false, error: text.lowercased().contains("refused") ? "connection refused" : text)
        }
    }

    /// UDP probes of every address at once: one blocking call on NIO's thread pool (never on the
    /// cooperative pool or the actor) sends them all and waits `timeout` in all, however many.
    static func udp(_ addrs: [String], timeout: TimeAmount) async -> [Outcome] {
        let addresses = addrs.map(PeerAddress.socketAddress)
        let waitMs = Int32(clamping: timeout.nanoseconds / 1_000_000)
        let refused = (try? await NIOThreadPool.singleton.runIfActive { udpRefused(addresses, waitMs: waitMs) }) ?? addresses.map { _ in nil }
        return zip(addresses, refused).map { address, refused in
            guard address != nil else { return Outcome(reachable: false, error: "not a numeric host:port") }
            switch refused {
            case true?: return Outcome(reachable: false, error: "port unreachable (ICMP)")
            case false?: return Outcome(reachable: true)
            case nil: return Outcome(reachable: false, error: "cannot send a datagram there")
            }
        }
    }

    /// Sends one empty datagram on a socket connected to each address, then waits up to `waitMs`
    /// in all for the kernel to report any refused. Per address: true refused, false not (in
    /// time), nil when no socket could be made, connected or sent on.
    private static func udpRefused(_ addresses: [SocketAddress?], waitMs: Int32) -> [Bool?] {
        var result: [Bool?] = addresses.map { _ in nil }
        var sockets: [Int: Int32] = [:]
        defer { for fd in sockets.values { close(fd) } }
        for (i, address) in addresses.enumerated() {
            guard let address else { continue }
            let fd = socket(Int32(address.protocol.rawValue), Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { continue }
            sockets[i] = fd
            let connected = address.withSockAddr { pointer, length in connect(fd, pointer, socklen_t(length)) }
            guard connected == 0 else { continue }
            if send(fd, nil, 0, 0) >= 0 { result[i] = false } else if errno == ECONNREFUSED { result[i] = true }
        }
        let deadline = ContinuousClock.now + .milliseconds(Int64(waitMs))
        var pending = sockets.filter { result[$0.key] == false }
        while !pending.isEmpty {
            let left = deadline - ContinuousClock.now
            let leftMs = Int32(clamping: Int64(left / .milliseconds(1)))
            guard leftMs > 0 else { break }
            let order = Array(pending.keys)
            var entries = order.map { pollfd(fd: pending[$0]!, events: Int16(POLLIN), revents: 0) }
            guard poll(&entries, nfds_t(entries.count), leftMs) > 0 else { break }
            for (i, entry) in zip(order, entries) where entry.revents != 0 {
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                if getsockopt(entry.fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0, error == ECONNREFUSED { result[i] = true }
                pending[i] = nil
            }
        }
        return result
    }
}
