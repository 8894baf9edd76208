import CSodium
import Foundation

/// A node's Ed25519 key pair: the public key is the node's stable identity (`node` in the
/// control protocol); the secret key signs link bindings and, later, messages.
public struct Identity: Sendable {
    static let fileHeader = "huddle-identity"
    public let publicKey: [UInt8]
    private let secretKey: [UInt8]

    private init(secretKey: [UInt8]) {
        self.secretKey = secretKey
        publicKey = Array(secretKey[32..<64])
    }

    public static func generate() -> Identity {
        Sodium.initialize()
        var pk = [UInt8](repeating: 0, count: 32)
        var sk = [UInt8](repeating: 0, count: 64)
        _ = crypto_sign_keypair(&pk, &sk)
        return Identity(secretKey: sk)
    }

    /// The key pair derived from a 32-byte seed: deterministic, for the simulator and tests.
    public init(seed: [UInt8]) {
        precondition(seed.count == 32, "an identity seed is 32 bytes")
        Sodium.initialize()
        var pk = [UInt8](repeating: 0, count: 32)
        var sk = [UInt8](repeating: 0, count: 64)
        _ = crypto_sign_seed_keypair(&pk, &sk, seed)
        self.init(secretKey: sk)
    }

    /// Loads the identity file at `path`, creating it (mode 0600) when absent.
    public static func loadOrCreate(path: String) throws -> Identity {
        if access(path, F_OK) != 0 {
            let identity = generate()
            try KeyFile.write(identity.secretKey, header: fileHeader, to: path)
            return identity
        }
        let sk = try KeyFile.read(path, header: fileHeader, length: 64, what: "identity file")
        var derived = [UInt8](repeating: 0, count: 32)
        _ = crypto_sign_ed25519_sk_to_pk(&derived, sk)
        guard derived == Array(sk[32..<64]) else { throw CryptoError("identity file \(path) is malformed: its public half does not match") }
        return Identity(secretKey: sk)
    }

    public func sign(_ message: [UInt8]) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: 64)
        _ = crypto_sign_detached(&signature, nil, message, UInt64(message.count), secretKey)
        return signature
    }

    public static func verify(signature: [UInt8], message: [UInt8], publicKey: [UInt8]) -> Bool {
        Sodium.initialize()
        guard signature.count == 64, publicKey.count == 32 else { return false }
        return crypto_sign_verify_detached(signature, message, UInt64(message.count), publicKey) == 0
    }

    public var publicKeyHex: String { hexString(publicKey) }

    /// This identity's X25519 secret key: the Ed25519 secret key converted as libsodium does
    /// (`crypto_sign_ed25519_sk_to_curve25519`). Internal, so the secret never leaves this module:
    /// `SealedBox.open(_:with:)` uses it to open what was sealed to the node key.
    func x25519SecretKey() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        _ = crypto_sign_ed25519_sk_to_curve25519(&out, secretKey)
        return out
    }
}
