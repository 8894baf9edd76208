import CSodium

/// Anonymous public-key encryption to a member's node key: libsodium's sealed box
/// (`crypto_box_seal`: an ephemeral X25519 key, XSalsa20-Poly1305) to the X25519 key converted
/// from the Ed25519 node key (`crypto_sign_ed25519_pk_to_curve25519`).
///
/// Guarantees: only the holder of the node key's identity opens the box (`open(_:with:)`); the box
/// says nothing about who sealed it (the epoch change that carries it is signed for that); a box
/// altered in any bit, or opened by another identity, fails with `.doesNotOpen`. The box is
/// `overhead` bytes longer than what it seals.
///
/// With an `ephemeralSeed` the ephemeral key pair comes from that seed (`crypto_box_seed_keypair`)
/// and the nonce from BLAKE2b-192(ephemeral public key ‖ recipient key), exactly as
/// `crypto_box_seal` computes them, so the box is byte for byte what `crypto_box_seal` would have
/// made with that ephemeral key and opens with `crypto_box_seal_open`. This keeps a core that seals
/// a pure function of the randomness it is given (the simulator replays it); the seed must be secret
/// and used once, like any ephemeral key.
public enum SealedBox {
    /// Bytes a box adds to its plaintext: the ephemeral public key (32) and the tag (16).
    public static let overhead = 48

    public static func seal(_ plaintext: [UInt8], to nodeKey: [UInt8], ephemeralSeed: [UInt8]? = nil) throws(CryptoError) -> [UInt8] {
        Sodium.initialize()
        let recipient = try x25519PublicKey(nodeKey)
        guard let seed = ephemeralSeed else {
            var out = [UInt8](repeating: 0, count: plaintext.count + overhead)
            guard crypto_box_seal(&out, plaintext, UInt64(plaintext.count), recipient) == 0 else { throw .badNodeKey }
            return out
        }
        guard seed.count == 32 else { throw .badSeed }
        var ephemeralPublic = [UInt8](repeating: 0, count: 32), ephemeralSecret = [UInt8](repeating: 0, count: 32)
        guard crypto_box_seed_keypair(&ephemeralPublic, &ephemeralSecret, seed) == 0 else { throw .badSeed }
        let nonce = BLAKE2b.hash(ephemeralPublic + recipient, length: 24)
        var boxed = [UInt8](repeating: 0, count: plaintext.count + 16)
        // crypto_box_easy refuses (−1) a recipient key whose shared secret would be all zeros.
        guard crypto_box_easy(&boxed, plaintext, UInt64(plaintext.count), nonce, recipient, ephemeralSecret) == 0 else { throw .badNodeKey }
        return ephemeralPublic + boxed
    }

    /// Opens a box sealed to `identity`'s node key.
    public static func open(_ box: [UInt8], with identity: Identity) throws(CryptoError) -> [UInt8] {
        Sodium.initialize()
        guard box.count >= overhead else { throw .tooShort(box.count) }
        let publicKey = try x25519PublicKey(identity.publicKey)
        let secretKey = identity.x25519SecretKey()
        var out = [UInt8](repeating: 0, count: box.count - overhead)
        guard crypto_box_seal_open(&out, box, UInt64(box.count), publicKey, secretKey) == 0 else { throw .doesNotOpen }
        return out
    }

    /// Whether `nodeKey` is one a box can be sealed to (32 bytes, converts to an X25519 key).
    public static func canSeal(to nodeKey: [UInt8]) -> Bool {
        Sodium.initialize()
        return (try? x25519PublicKey(nodeKey)) != nil
    }

    /// The X25519 public key of an Ed25519 node key; `.badNodeKey` for anything that does not convert.
    static func x25519PublicKey(_ nodeKey: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard nodeKey.count == 32 else { throw .badNodeKey }
        var out = [UInt8](repeating: 0, count: 32)
        guard crypto_sign_ed25519_pk_to_curve25519(&out, nodeKey) == 0 else { throw .badNodeKey }
        return out
    }
}
