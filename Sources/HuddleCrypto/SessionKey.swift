import CSodium

/// What a session subkey is for; each purpose gets an independent key from the KDF.
public enum SessionSubkey: UInt64, Sendable {
    case handshakePSK = 1, datagram = 2, chunkHeader = 3
}

/// The 32-byte secret every member of a session holds. Never used directly: `subkey(_:)` derives
/// one key per purpose; `fingerprint` names the session without revealing it.
public struct SessionKey: Sendable {
    public static let length = 32
    static let fileHeader = "huddle-session-key"

    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws {
        guard bytes.count == Self.length else { throw CryptoError("a session key is \(Self.length) bytes, not \(bytes.count)") }
        self.bytes = bytes
    }

    public static func generate() -> SessionKey {
        SessionKey(unchecked: SecureRandom.bytes(length))
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    /// Writes the key as a new file with mode 0600; refuses to overwrite an existing file.
    public func write(to path: String) throws { try KeyFile.write(bytes, header: Self.fileHeader, to: path) }

    /// Loads a key file, refusing group/other-readable files and malformed contents.
    public static func load(from path: String) throws -> SessionKey {
        SessionKey(unchecked: try KeyFile.read(path, header: fileHeader, length: length, what: "key file"))
    }

    /// 16 hex digits: the first 8 bytes of a BLAKE2b-256 of the key under its own context.
    public var fingerprint: String {
        hexString(BLAKE2b.hash(Array("huddle fingerprint".utf8) + bytes, length: 32).prefix(8))
    }

    public func subkey(_ purpose: SessionSubkey) -> [UInt8] {
        Sodium.initialize()
        var out = [UInt8](repeating: 0, count: 32)
        let context: [CChar] = Array("huddle01".utf8CString.prefix(8))
        _ = crypto_kdf_derive_from_key(&out, 32, purpose.rawValue, context, bytes)
        return out
    }
}
