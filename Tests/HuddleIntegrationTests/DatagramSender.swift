import Foundation
import HuddleAdversary
import HuddleCore
import HuddleCrypto

/// Seals datagrams as the impostor at one end of `link` may: under its own link keys, naming
/// itself (or, to try, someone else) as sender.
func sealedOnLink(_ payloads: [DatagramPayload], link: AdversaryLink, from sender: MemberID, to recipient: MemberID) -> [[UInt8]] {
    link.sealed(payloads, from: sender, to: recipient)
}

extension AdversaryLink {
    /// The member id the impostor links as.
    static let mallory = MemberID(raw: 0xBAD)

    /// A key holder's own link to `node` (member `mallory`, a fresh node key, its record signed),
    /// returned once the node has admitted it — holding `links` links then — so its datagram keys
    /// are in place there.
    static func admitted(by node: TestNode, key: SessionKey, links: Int64) async throws -> AdversaryLink {
        let identity = Identity.generate()
        let info = MemberInfo(id: mallory, node: identity.publicKey, name: "mallory", addr: "127.0.0.1:9").signed(by: identity)
        let link = try AdversaryLink(addr: node.addr, key: key, identity: identity, info: info)
        do {
            try await eventually("\(node.name) to admit mallory's link") { (try await node.request("stats")["links"]?.intValue ?? 0) == links }
        } catch {
            link.close()
            throw error
        }
        return link
    }
}
