import HuddleCrypto

/// The session-key form: seals datagrams under the session's datagram subkey,
/// `version (1) | nonce (24) | XChaCha20-Poly1305`. A datagram that fails to open is dropped before
/// any of it is parsed. Every key holder can seal this form under any member id, so its sender is
/// only a claim: it carries only a bare ping or ack before a link exists (`SessionCore+Datagrams`);
/// everything else goes link-keyed (`PairDatagramSeal`).
public struct DatagramSeal: Sendable {
    public static let version: UInt8 = 1
    private let key: [UInt8]

    public init(key: [UInt8]) { self.key = key }

    public func seal(_ payload: [UInt8]) -> [UInt8] {
        let nonce = AEAD.randomNonce()
        var out: [UInt8] = [Self.version]
        out.reserveCapacity(1 + nonce.count + payload.count + AEAD.tagLength)
        out.append(contentsOf: nonce)
        out.append(contentsOf: AEAD.seal(payload, ad: [Self.version], nonce: nonce, key: key))
        return out
    }

    public func open(_ datagram: [UInt8]) throws(CoreError) -> [UInt8] {
        let header = 1 + AEAD.nonceLength
        guard datagram.count >= header + AEAD.tagLength else { throw CoreError("datagram too short") }
        guard datagram[0] == Self.version else { throw CoreError("unsupported datagram seal version") }
        do {
            return try AEAD.open(Array(datagram[header...]), ad: [Self.version], nonce: Array(datagram[1..<header]), key: key)
        } catch {
            throw CoreError("datagram failed to open")
        }
    }
}
