import HuddleCrypto

/// Seals a datagram under one direction of a link's datagram keys (`PairDatagramKeys`):
/// `version 2 (1) | sender (8) | key id (4) | nonce (24) | XChaCha20-Poly1305(payload)`, with
/// `version | sender | recipient | key id` as additional data.
///
/// Guarantees: the sender and the key id travel in clear, so the receiver looks up the one key to
/// try (an outsider costs it one lookup and at most one AEAD check); the key is held only by the
/// two ends of one link, so a datagram that opens was sealed by the member at the other end of it;
/// the recipient is bound by the additional data and by the key, so a datagram sealed for one
/// member opens at no other. Nothing is parsed before the AEAD check but the clear header.
public enum PairDatagramSeal {
    public static let version: UInt8 = 2
    static let headerLength = 1 + 8 + 4 + AEAD.nonceLength

    public static func seal(_ payload: [UInt8], from sender: MemberID, to recipient: MemberID, keyID: UInt32, key: [UInt8]) -> [UInt8] {
        var header = WireWriter(capacity: headerLength + payload.count + AEAD.tagLength)
        header.u8(version); header.member(sender); header.u32(keyID)
        let nonce = AEAD.randomNonce()
        var out = header.bytes
        out.append(contentsOf: nonce)
        out.append(contentsOf: AEAD.seal(payload, ad: additionalData(sender, recipient, keyID), nonce: nonce, key: key))
        return out
    }

    /// The clear header: who claims to have sent it, and the id of the key it names.
    public static func header(_ datagram: [UInt8]) throws(CoreError) -> (sender: MemberID, keyID: UInt32) {
        guard datagram.count >= headerLength + AEAD.tagLength else { throw CoreError("datagram too short") }
        var r = WireReader(datagram)
        guard try r.u8("version") == version else { throw CoreError("not a link-keyed datagram") }
        return (try r.member("sender"), try r.u32("key id"))
    }

    /// The payload, if `key` (the receive key the header's id names) opens the datagram as sent
    /// from its header's sender to `recipient`.
    public static func open(_ datagram: [UInt8], to recipient: MemberID, key: [UInt8]) throws(CoreError) -> [UInt8] {
        let (sender, keyID) = try header(datagram)
        let nonceStart = headerLength - AEAD.nonceLength
        do {
            return try AEAD.open(Array(datagram[headerLength...]), ad: additionalData(sender, recipient, keyID),
                                 nonce: Array(datagram[nonceStart..<headerLength]), key: key)
        } catch {
            throw CoreError("datagram failed to open")
        }
    }

    private static func additionalData(_ sender: MemberID, _ recipient: MemberID, _ keyID: UInt32) -> [UInt8] {
        var w = WireWriter(capacity: 21)
        w.u8(version); w.member(sender); w.member(recipient); w.u32(keyID)
        return w.bytes
    }
}
