import Foundation
import HuddleCore

/// Sends each of `datagrams` as one UDP datagram to `addr` (`127.0.0.1:port`), as an attacker
/// holding the session key would: sealed by the caller with our own codec.
public func sendUDP(_ datagrams: [[UInt8]], to addr: String) throws {
    let parts = addr.split(separator: ":")
    guard parts.count == 2, let port = UInt16(parts[1]) else { throw AdversaryError("bad address \(addr)") }
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0 else { throw AdversaryError("no UDP socket") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, String(parts[0]), &address.sin_addr)
    for datagram in datagrams {
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, datagram, datagram.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard sent == datagram.count else { throw AdversaryError("sendto failed: \(String(cString: strerror(errno)))") }
    }
}

extension AdversaryLink {
    /// Seals datagrams as the adversary at this end of the link may: under its own link keys,
    /// naming itself (or, to try, someone else) as sender.
    public func sealed(_ payloads: [DatagramPayload], from sender: MemberID, to recipient: MemberID) -> [[UInt8]] {
        payloads.map { PairDatagramSeal.seal($0.encoded(), from: sender, to: recipient, keyID: datagramKeys.sendID, key: datagramKeys.send) }
    }
}
