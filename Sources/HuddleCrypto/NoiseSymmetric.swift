import CSodium

/// The hash function of a Noise protocol, with the HMAC and HKDF built on it (spec section 4.3).
public enum NoiseHash: Sendable {
    case sha256, blake2b

    var length: Int { self == .sha256 ? 32 : 64 }
    var blockLength: Int { self == .sha256 ? 64 : 128 }
    var name: String { self == .sha256 ? "SHA256" : "BLAKE2b" }

    func hash(_ data: [UInt8]) -> [UInt8] {
        Sodium.initialize()
        var out = [UInt8](repeating: 0, count: length)
        switch self {
        case .sha256: _ = crypto_hash_sha256(&out, data, UInt64(data.count))
        case .blake2b: _ = crypto_generichash(&out, 64, data, UInt64(data.count), nil, 0)
        }
        return out
    }

    func hmac(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var k = key.count > blockLength ? hash(key) : key
        k += [UInt8](repeating: 0, count: blockLength - k.count)
        let inner = hash(k.map { $0 ^ 0x36 } + data)
        return hash(k.map { $0 ^ 0x5C } + inner)
    }

    /// HKDF with 2 or 3 outputs, each `length` bytes.
    func hkdf(chainingKey: [UInt8], _ ikm: [UInt8], outputs: Int) -> [[UInt8]] {
        let temp = hmac(key: chainingKey, ikm)
        let o1 = hmac(key: temp, [1])
        let o2 = hmac(key: temp, o1 + [2])
        guard outputs == 3 else { return [o1, o2] }
        return [o1, o2, hmac(key: temp, o2 + [3])]
    }
}

/// A Noise CipherState over ChaChaPoly (IETF, 96-bit nonce = 32 zero bits + 64-bit little-endian
/// counter). Without a key it passes data through, as the spec requires during a handshake.
/// The counter never wraps: the last nonce is refused.
public struct NoiseCipherState: Sendable {
    private var key: [UInt8]?
    public private(set) var nonce: UInt64 = 0

    init(key: [UInt8]? = nil) { self.key = key }

    var hasKey: Bool { key != nil }

    private func nonceBytes() -> [UInt8] {
        var n = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { n[4 + i] = UInt8(truncatingIfNeeded: nonce >> (8 * UInt64(i))) }
        return n
    }

    public mutating func encrypt(ad: [UInt8], plaintext: [UInt8]) throws -> [UInt8] {
        guard let key else { return plaintext }
        guard nonce < UInt64.max else { throw CryptoError("Noise nonce exhausted; the link must be rekeyed") }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var outLength: UInt64 = 0
        _ = crypto_aead_chacha20poly1305_ietf_encrypt(&out, &outLength, plaintext, UInt64(plaintext.count), ad, UInt64(ad.count), nil, nonceBytes(), key)
        nonce += 1
        return out
    }

    /// Noise REKEY (spec 4.2, 11.3): the key becomes the first 32 bytes of
    /// ENCRYPT(k, 2^64 − 1, "", 32 zero bytes); the nonce carries on. Both ends of a link call it
    /// at the same point of the stream, so no message is needed to agree on the new key, and a
    /// key taken from memory later does not open what was sent before the rekey.
    public mutating func rekey() {
        guard let key else { return }
        let zeros = [UInt8](repeating: 0, count: 32)
        let maximumNonce = [UInt8](repeating: 0, count: 4) + [UInt8](repeating: 0xFF, count: 8)
        var out = [UInt8](repeating: 0, count: 32 + 16)
        var outLength: UInt64 = 0
        _ = crypto_aead_chacha20poly1305_ietf_encrypt(&out, &outLength, zeros, 32, nil, 0, nil, maximumNonce, key)
        self.key = Array(out.prefix(32))
    }

    /// Decrypts a transport message (empty associated data) straight from `ciphertext`'s memory,
    /// e.g. a network buffer, without copying it into an array first.
    public mutating func decrypt(ciphertext: UnsafeRawBufferPointer) throws -> [UInt8] {
        try decrypt(ad: UnsafeRawBufferPointer(start: nil, count: 0), ciphertext: ciphertext)
    }

    public mutating func decrypt(ad: [UInt8], ciphertext: [UInt8]) throws -> [UInt8] {
        try ad.withUnsafeBytes { ad in try ciphertext.withUnsafeBytes { try decrypt(ad: ad, ciphertext: $0) } }
    }

    private mutating func decrypt(ad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer) throws -> [UInt8] {
        guard let key else { return Array(ciphertext) }
        guard nonce < UInt64.max else { throw CryptoError("Noise nonce exhausted; the link must be rekeyed") }
        guard ciphertext.count >= 16, let input = ciphertext.baseAddress else { throw CryptoError("Noise ciphertext shorter than its tag") }
        var out = [UInt8](repeating: 0, count: ciphertext.count - 16)
        var outLength: UInt64 = 0
        let status = crypto_aead_chacha20poly1305_ietf_decrypt(
            &out, &outLength, nil, input.assumingMemoryBound(to: UInt8.self), UInt64(ciphertext.count),
            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count), nonceBytes(), key)
        guard status == 0 else { throw CryptoError("Noise decryption failed (wrong key or tampered data)") }
        nonce += 1
        return out
    }
}

/// Noise's SymmetricState (spec section 5.2): chaining key, handshake hash and the cipher.
struct NoiseSymmetricState: Sendable {
    let hashFunction: NoiseHash
    var chainingKey: [UInt8]
    var handshakeHash: [UInt8]
    var cipher = NoiseCipherState()

    init(protocolName: String, hash: NoiseHash) {
        hashFunction = hash
        let name = Array(protocolName.utf8)
        handshakeHash = name.count <= hash.length ? name + [UInt8](repeating: 0, count: hash.length - name.count) : hash.hash(name)
        chainingKey = handshakeHash
    }

    mutating func mixKey(_ ikm: [UInt8]) {
        let out = hashFunction.hkdf(chainingKey: chainingKey, ikm, outputs: 2)
        chainingKey = out[0]
        cipher = NoiseCipherState(key: Array(out[1].prefix(32)))
    }

    mutating func mixHash(_ data: [UInt8]) { handshakeHash = hashFunction.hash(handshakeHash + data) }

    mutating func mixKeyAndHash(_ ikm: [UInt8]) {
        let out = hashFunction.hkdf(chainingKey: chainingKey, ikm, outputs: 3)
        chainingKey = out[0]
        mixHash(out[1])
        cipher = NoiseCipherState(key: Array(out[2].prefix(32)))
    }

    mutating func encryptAndHash(_ plaintext: [UInt8]) throws -> [UInt8] {
        let ciphertext = try cipher.encrypt(ad: handshakeHash, plaintext: plaintext)
        mixHash(ciphertext)
        return ciphertext
    }

    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws -> [UInt8] {
        let plaintext = try cipher.decrypt(ad: handshakeHash, ciphertext: ciphertext)
        mixHash(ciphertext)
        return plaintext
    }

    /// Secrets for another use of the finished handshake: HKDF(ck, HASH(label)) with three
    /// outputs. The chaining key holds every DH result, so these keys are as secret as the
    /// transport keys (and independent of them: `split` uses an empty input), unlike the
    /// handshake hash, which anyone who holds the PSK and saw the transcript can compute.
    func export(label: [UInt8]) -> [[UInt8]] {
        hashFunction.hkdf(chainingKey: chainingKey, hashFunction.hash(label), outputs: 3)
    }

    func split() -> (NoiseCipherState, NoiseCipherState) {
        let out = hashFunction.hkdf(chainingKey: chainingKey, [], outputs: 2)
        return (NoiseCipherState(key: Array(out[0].prefix(32))), NoiseCipherState(key: Array(out[1].prefix(32))))
    }
}
