import Foundation
import HuddleCore
import HuddleCrypto

/// Sends each of `datagrams` as one UDP datagram to `addr` (`127.0.0.1:port`), as an attacker
/// holding the session key would: sealed by the caller with our own codec.
func sendUDP(_ datagrams: [[UInt8]], to addr: String) throws {
    let parts = addr.split(separator: ":")
    guard parts.count == 2, let port = UInt16(parts[1]) else { throw TestTimeout(description: "bad address \(addr)") }
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0 else { throw TestTimeout(description: "no UDP socket") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, String(parts[0]), &address.sin_addr)
    for datagram in datagrams {
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, datagram, datagram.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard sent == datagram.count else { throw TestTimeout(description: "sendto failed: \(String(cString: strerror(errno)))") }
    }
}

/// Seals datagrams as the impostor at one end of `link` may: under its own link keys, naming
/// itself (or, to try, someone else) as sender.
func sealedOnLink(_ payloads: [DatagramPayload], link: ImpostorLink, from sender: MemberID, to recipient: MemberID) -> [[UInt8]] {
    payloads.map { PairDatagramSeal.seal($0.encoded(), from: sender, to: recipient, keyID: link.datagramKeys.sendID, key: link.datagramKeys.send) }
}

extension ImpostorLink {
    /// The member id the impostor links as.
    static let mallory = MemberID(raw: 0xBAD)

    /// A key holder's own link to `node` (member `mallory`, a fresh node key), returned once the
    /// node has admitted it — holding `links` links then — so its datagram keys are in place there.
    static func admitted(by node: TestNode, key: SessionKey, links: Int64) async throws -> ImpostorLink {
        let identity = Identity.generate()
        let parts = node.addr.split(separator: ":")
        let link = try ImpostorLink(host: String(parts[0]), port: UInt16(parts[1]) ?? 0, key: key, identity: identity,
                                    info: MemberInfo(id: mallory, node: identity.publicKey, name: "mallory", addr: "127.0.0.1:9"))
        do {
            try await eventually("\(node.name) to admit mallory's link") { (try await node.request("stats")["links"]?.intValue ?? 0) == links }
        } catch {
            link.close()
            throw error
        }
        return link
    }
}
