import CSodium

/// An X25519 key pair for Noise.
public struct NoiseKeyPair: Sendable {
    public let publicKey: [UInt8]
    public let privateKey: [UInt8]

    public static func generate() -> NoiseKeyPair {
        // A fresh 32-byte scalar; X25519 clamps it, so every value is a valid private key.
        NoiseKeyPair(validPrivateKey: SecureRandom.bytes(32))
    }

    public init(privateKey: [UInt8]) throws {
        guard privateKey.count == 32 else { throw CryptoError("an X25519 private key is 32 bytes, not \(privateKey.count)") }
        self.init(validPrivateKey: privateKey)
    }

    private init(validPrivateKey: [UInt8]) {
        Sodium.initialize()
        var pub = [UInt8](repeating: 0, count: 32)
        _ = crypto_scalarmult_curve25519_base(&pub, validPrivateKey)
        privateKey = validPrivateKey
        publicKey = pub
    }

    func dh(_ remotePublic: [UInt8]) throws -> [UInt8] {
        guard remotePublic.count == 32 else { throw CryptoError("an X25519 public key is 32 bytes") }
        var out = [UInt8](repeating: 0, count: 32)
        guard crypto_scalarmult_curve25519(&out, privateKey, remotePublic) == 0 else {
            throw CryptoError("X25519 with a low-order public key")
        }
        return out
    }
}

/// Noise's HandshakeState (spec section 5.3) for `Noise_<pattern>_25519_ChaChaPoly_<SHA256|BLAKE2b>`.
/// Pure: randomness enters only through the optional fixed ephemeral key (tests) or
/// `NoiseKeyPair.generate()`. Every read checks lengths first and throws on bad input.
public struct NoiseHandshakeState: Sendable {
    public static let maximumMessage = 65_535

    public let pattern: NoisePattern
    public let initiator: Bool
    private var symmetric: NoiseSymmetricState
    private var s: NoiseKeyPair?
    private var e: NoiseKeyPair?
    public private(set) var remoteStaticKey: [UInt8]?
    private var re: [UInt8]?
    private var psks: [[UInt8]]
    private var messageIndex = 0

    public init(protocolName: String, initiator: Bool, prologue: [UInt8], s: NoiseKeyPair?, e: NoiseKeyPair? = nil,
                rs: [UInt8]? = nil, re: [UInt8]? = nil, psks: [[UInt8]] = []) throws {
        let parts = protocolName.split(separator: "_")
        guard parts.count == 5, parts[0] == "Noise", parts[2] == "25519", parts[3] == "ChaChaPoly" else {
            throw CryptoError("unsupported Noise protocol \(protocolName) (this engine speaks 25519, ChaChaPoly, SHA256 or BLAKE2b)")
        }
        let hash: NoiseHash
        switch parts[4] {
        case "SHA256": hash = .sha256
        case "BLAKE2b": hash = .blake2b
        default: throw CryptoError("unsupported Noise hash \(parts[4])")
        }
        pattern = try NoisePattern.named(String(parts[1]))
        guard psks.allSatisfy({ $0.count == 32 }) else { throw CryptoError("Noise PSKs are 32 bytes") }
        let needed = pattern.messages.reduce(0) { $0 + $1.filter { $0 == .psk }.count }
        guard psks.count == needed else { throw CryptoError("\(protocolName) needs \(needed) PSKs, got \(psks.count)") }
        self.initiator = initiator
        self.s = s
        self.e = e
        self.remoteStaticKey = rs
        self.re = re
        self.psks = psks
        symmetric = NoiseSymmetricState(protocolName: protocolName, hash: hash)
        symmetric.mixHash(prologue)
        // Pre-messages: the initiator's keys first, then the responder's (spec 7.1).
        for (tokens, local) in [(pattern.initiatorPreMessage, initiator), (pattern.responderPreMessage, !initiator)] {
            for token in tokens {
                let key: [UInt8]?
                switch token {
                case .s: key = local ? s?.publicKey : rs
                case .e: key = local ? e?.publicKey : re
                default: throw CryptoError("bad pre-message token \(token)")
                }
                guard let key else { throw CryptoError("\(protocolName) needs the \(local ? "local" : "remote") \(token.rawValue) key before the handshake") }
                symmetric.mixHash(key)
                if token == .e && pattern.hasPSK { symmetric.mixKey(key) }
            }
        }
    }

    /// Supplies the local static key late, for patterns that first use it when this side writes
    /// `s` (XX): a responder then makes no key before the first message has decrypted.
    public mutating func setLocalStatic(_ key: NoiseKeyPair) throws {
        guard s == nil else { throw CryptoError("the local static key is already set") }
        s = key
    }

    public var isComplete: Bool { messageIndex >= pattern.messages.count }
    public var handshakeHash: [UInt8] { symmetric.handshakeHash }
    /// Whether the next message is this side's to write.
    public var isMyTurn: Bool { (messageIndex % 2 == 0) == initiator }

    public mutating func writeMessage(payload: [UInt8]) throws -> [UInt8] {
        guard !isComplete else { throw CryptoError("the Noise handshake is already complete") }
        guard isMyTurn else { throw CryptoError("it is not this side's turn to write a handshake message") }
        var out: [UInt8] = []
        for token in pattern.messages[messageIndex] {
            switch token {
            case .e:
                let ephemeral = e ?? NoiseKeyPair.generate()
                e = ephemeral
                out += ephemeral.publicKey
                symmetric.mixHash(ephemeral.publicKey)
                if pattern.hasPSK { symmetric.mixKey(ephemeral.publicKey) }
            case .s:
                guard let s else { throw CryptoError("this pattern needs a local static key") }
                out += try symmetric.encryptAndHash(s.publicKey)
            case .psk:
                symmetric.mixKeyAndHash(psks.removeFirst())
            default:
                symmetric.mixKey(try dh(token))
            }
        }
        out += try symmetric.encryptAndHash(payload)
        guard out.count <= Self.maximumMessage else { throw CryptoError("Noise message of \(out.count) bytes exceeds 65535") }
        messageIndex += 1
        return out
    }

    public mutating func readMessage(_ message: [UInt8]) throws -> [UInt8] {
        guard !isComplete else { throw CryptoError("the Noise handshake is already complete") }
        guard !isMyTurn else { throw CryptoError("received a handshake message out of turn") }
        guard message.count <= Self.maximumMessage else { throw CryptoError("Noise message of \(message.count) bytes exceeds 65535") }
        var offset = 0
        func take(_ n: Int) throws -> [UInt8] {
            guard message.count - offset >= n else { throw CryptoError("truncated Noise handshake message") }
            defer { offset += n }
            return Array(message[offset..<offset + n])
        }
        for token in pattern.messages[messageIndex] {
            switch token {
            case .e:
                let key = try take(32)
                re = key
                symmetric.mixHash(key)
                if pattern.hasPSK { symmetric.mixKey(key) }
            case .s:
                remoteStaticKey = try symmetric.decryptAndHash(try take(symmetric.cipher.hasKey ? 48 : 32))
            case .psk:
                symmetric.mixKeyAndHash(psks.removeFirst())
            default:
                symmetric.mixKey(try dh(token))
            }
        }
        let payload = try symmetric.decryptAndHash(Array(message[offset...]))
        messageIndex += 1
        return payload
    }

    /// The transport ciphers, oriented for this side: (send, receive).
    public func split() throws -> (send: NoiseCipherState, receive: NoiseCipherState) {
        guard isComplete else { throw CryptoError("the Noise handshake is not complete") }
        let (c1, c2) = symmetric.split()
        return initiator ? (c1, c2) : (c2, c1)
    }

    /// Three secrets (each the hash's length) for another use of the finished handshake, the same
    /// at both ends and independent of the transport keys; a different `label` gives unrelated
    /// secrets (see `NoiseSymmetricState.export`).
    public func export(label: [UInt8]) throws -> [[UInt8]] {
        guard isComplete else { throw CryptoError("the Noise handshake is not complete") }
        return symmetric.export(label: label)
    }

    /// The DH for `token` from this side's point of view (es: initiator's e with responder's s).
    private func dh(_ token: NoisePattern.Token) throws -> [UInt8] {
        func need<T>(_ value: T?, _ what: String) throws -> T {
            guard let value else { throw CryptoError("Noise token \(token.rawValue) needs \(what)") }
            return value
        }
        switch (token, initiator) {
        case (.ee, _): return try need(e, "a local ephemeral").dh(try need(re, "a remote ephemeral"))
        case (.ss, _): return try need(s, "a local static").dh(try need(remoteStaticKey, "a remote static"))
        case (.es, true), (.se, false): return try need(e, "a local ephemeral").dh(try need(remoteStaticKey, "a remote static"))
        case (.es, false), (.se, true): return try need(s, "a local static").dh(try need(re, "a remote ephemeral"))
        default: throw CryptoError("token \(token.rawValue) is not a DH")
        }
    }
}
