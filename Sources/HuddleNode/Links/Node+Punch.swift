import HuddleCore
import NIOCore

/// The shell of hole punching (issue 36, item 3): what `SessionCore+Punch` decided, carried out.
/// A punch dial leaves from the node's listening address (the listener and the dial share it:
/// `SO_REUSEADDR` and `SO_REUSEPORT` on both), so an endpoint-independent NAT maps it to the
/// address members already see this node's datagrams come from — the reflexive address its
/// signed record offers (`SessionCore.reachAddresses`), since the UDP socket shares that port.
/// When both ends dial at once, their SYNs open each other's NAT and the connection forms (a TCP
/// simultaneous open). The link over it is the ordinary one: the lower member id starts the
/// handshake at both ends, and the node keeps it over the relayed link (`LinkPlanner.keepsNewLink`).
extension Node {
    /// How long a punch dial waits for its connection (the core gives up on the attempt later).
    static let punchConnectTimeout = TimeAmount.seconds(3)

    /// Sets where punch dials leave from (the listening socket's address, once it is bound).
    func setPunchSource(_ address: SocketAddress?) { punchSource = address }

    /// Dials each of `addrs` from the listening address and runs a link over what connects.
    func punchDial(peer: MemberID, addrs: [String], initiator: Bool) {
        guard let source = punchSource, !stopping else { return }
        let key = initiator ? handshakeKeys().first : nil
        for addr in addrs {
            spawner.spawn { [self] in
                do {
                    let channel = try await LinkSession.connect(addr, timeout: Self.punchConnectTimeout, from: source)
                    log.info("punched through to \(addr) (member \(peer)): linking")
                    await LinkSession.run(channel, role: initiator ? .initiator : .responder, key: key, node: self, registered: nil)
                } catch {
                    log.info("punch to \(addr) (member \(peer)) failed: \(error)")
                }
            }
        }
    }
}
