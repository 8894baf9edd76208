import CSodium

/// XChaCha20-Poly1305 (IETF) authenticated encryption: 32-byte key, 24-byte nonce, 16-byte tag.
public enum AEAD {
    public static let keyLength = 32, nonceLength = 24, tagLength = 16

    public static func seal(_ plaintext: [UInt8], ad: [UInt8], nonce: [UInt8], key: [UInt8]) -> [UInt8] {
        Sodium.initialize()
        precondition(key.count == keyLength && nonce.count == nonceLength, "AEAD.seal: caller passed a bad key or nonce length")
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var outLength: UInt64 = 0
        _ = crypto_aead_xchacha20poly1305_ietf_encrypt(&out, &outLength, plaintext, UInt64(plaintext.count), ad, UInt64(ad.count), nil, nonce, key)
        return out
    }

    public static func open(_ ciphertext: [UInt8], ad: [UInt8], nonce: [UInt8], key: [UInt8]) throws -> [UInt8] {
        Sodium.initialize()
        guard key.count == keyLength, nonce.count == nonceLength else { throw CryptoError("AEAD: bad key or nonce length") }
        guard ciphertext.count >= tagLength else { throw CryptoError("AEAD: ciphertext shorter than its tag") }
        var out = [UInt8](repeating: 0, count: ciphertext.count - tagLength)
        var outLength: UInt64 = 0
        guard crypto_aead_xchacha20poly1305_ietf_decrypt(&out, &outLength, nil, ciphertext, UInt64(ciphertext.count), ad, UInt64(ad.count), nonce, key) == 0 else {
            throw CryptoError("AEAD: authentication failed")
        }
        return out
    }

    public static func randomNonce() -> [UInt8] { SecureRandom.bytes(nonceLength) }
}

/// BLAKE2b (libsodium's generichash): 16 to 64 bytes of output, optionally keyed.
public enum BLAKE2b {
    public static func hash(_ data: [UInt8], length: Int = 32, key: [UInt8] = []) -> [UInt8] {
        Sodium.initialize()
        let n = min(max(length, 16), 64)
        var out = [UInt8](repeating: 0, count: n)
        _ = crypto_generichash(&out, n, data, UInt64(data.count), key.isEmpty ? nil : key, key.count)
        return out
    }

    /// Unkeyed BLAKE2b of bytes given in parts: `feed` calls its argument once per part, in order
    /// (the same hash as `hash(_:length:)` of the parts joined, without joining them).
    public static func hash(length: Int = 32, _ feed: ((UnsafeRawBufferPointer) -> Void) -> Void) -> [UInt8] {
        Sodium.initialize()
        let n = min(max(length, 16), 64)
        // libsodium's state (64-byte aligned; Swift does not import its type, so it is opaque here).
        let raw = UnsafeMutableRawPointer.allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
        defer { raw.deallocate() }
        let state = OpaquePointer(raw)
        _ = crypto_generichash_init(state, nil, 0, n)
        feed { part in
            _ = crypto_generichash_update(state, part.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(part.count))
        }
        var out = [UInt8](repeating: 0, count: n)
        _ = crypto_generichash_final(state, &out, n)
        return out
    }

    /// Keyed BLAKE2b of `data` written to `out` (16...64 bytes; the key 16...64 bytes), with no
    /// allocation: for hashing many small inputs on a hot path.
    public static func hash(_ data: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        Sodium.initialize()
        precondition((16...64).contains(out.count) && (16...64).contains(key.count), "BLAKE2b.hash: caller passed a bad output or key length")
        _ = crypto_generichash(
            out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count,
            data.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(data.count),
            key.baseAddress!.assumingMemoryBound(to: UInt8.self), key.count)
    }
}
