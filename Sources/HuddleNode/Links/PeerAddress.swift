import HuddleCore
import NIOCore
import NIOPosix

/// Where the node dials and sends datagrams, made without asking DNS on the node's actor.
///
/// Guarantees: `socketAddress` never looks anything up: an address that is not a numeric
/// `host:port` (`HostPort.numeric`) — a hostname from a peer above all — gives nil, and nothing is
/// dialled or sent there. `resolveUserAddress` is for the user's own addresses only (`--join`
/// seeds, the `join` op, `huddle pair`): a hostname is looked up once, by `getaddrinfo` on NIO's
/// thread pool (never on the node's actor or an event loop), and the numeric `host:port` it
/// gives is what the node then dials.
enum PeerAddress {
    /// The socket address of a numeric `host:port`; nil for anything else.
    static func socketAddress(_ addr: String) -> SocketAddress? {
        guard let parsed = HostPort.numeric(addr) else { return nil }
        return try? SocketAddress(ipAddress: parsed.host, port: parsed.port)
    }

    /// `addr` as a numeric `host:port`: itself when it is one, else its host looked up off the actor.
    static func resolveUserAddress(_ addr: String) async throws(NodeError) -> String {
        if HostPort.isNumeric(addr) { return addr }
        let (host, port) = try parseHostPort(addr)
        do {
            let address = try await NIOThreadPool.singleton.runIfActive { try SocketAddress.makeAddressResolvingHost(host, port: port) }
            return hostPort(address)
        } catch {
            throw NodeError("cannot resolve \(addr): \(error)")
        }
    }
}
