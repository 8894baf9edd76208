/// The handshake that opens every Huddle link: `Noise_XXpsk0_25519_ChaChaPoly_BLAKE2b`, prologue
/// "huddle link v1", PSK = the session key's handshake subkey.
///
/// Guarantees: a peer without the session key fails on the first message (psk0 keys even the
/// first payload) and learns nothing; each side's payload binds its Ed25519 identity to its Noise
/// static key (`identity (32) | signature (64) over "huddle-link-binding v1" | static key`),
/// followed by the caller's app payload, and the binding is verified before `result` is set.
/// A responder does no work of its own — no static key, no signature — until the initiator's
/// first message has decrypted under the PSK: an outsider costs it one hash chain and one AEAD check.
public struct LinkHandshake: Sendable {
    public enum Role: Sendable { case initiator, responder }

    public static let protocolName = "Noise_XXpsk0_25519_ChaChaPoly_BLAKE2b"
    static let prologue = Array("huddle link v1".utf8)
    static let bindingContext = Array("huddle-link-binding v1".utf8)
    public static let maximumAppPayload = 60_000

    private var state: NoiseHandshakeState
    private let role: Role
    private let identity: Identity
    private let appPayload: [UInt8]
    private var staticKey: NoiseKeyPair?
    /// The identity binding and app payload, made when this side first writes `s` (`prepareLocal`).
    private(set) var localPayload: [UInt8]?
    private var remotePayload: (nodeKey: [UInt8], app: [UInt8])?
    public private(set) var result: LinkHandshakeResult?

    /// `staticKey` (the Noise static key, fresh per link) is made when first needed unless given.
    public init(role: Role, sessionKey: SessionKey, identity: Identity, staticKey: NoiseKeyPair? = nil, appPayload: [UInt8]) throws {
        guard appPayload.count <= Self.maximumAppPayload else { throw CryptoError("link handshake payload of \(appPayload.count) bytes is too large") }
        self.role = role
        self.identity = identity
        self.appPayload = appPayload
        self.staticKey = staticKey
        state = try NoiseHandshakeState(protocolName: Self.protocolName, initiator: role == .initiator, prologue: Self.prologue,
                                        s: nil, psks: [sessionKey.subkey(.handshakePSK)])
    }

    /// Makes the static key and signs its binding: the work deferred until this side writes `s`.
    private mutating func prepareLocal() throws -> [UInt8] {
        if let localPayload { return localPayload }
        let key = staticKey ?? .generate()
        try state.setLocalStatic(key)
        let payload = identity.publicKey + identity.sign(Self.bindingContext + key.publicKey) + appPayload
        localPayload = payload
        return payload
    }

    /// The initiator's first message (`-> psk, e`).
    public mutating func start() throws -> [UInt8] {
        guard role == .initiator else { throw CryptoError("only the initiator starts a link handshake") }
        return try state.writeMessage(payload: [])
    }

    /// Takes the peer's next message; returns this side's reply, if one is due.
    public mutating func receive(_ message: [UInt8]) throws -> [UInt8]? {
        let payload = try state.readMessage(message)
        if state.remoteStaticKey != nil && remotePayload == nil {
            try verify(payload)
        } else if !payload.isEmpty {
            throw CryptoError("unexpected payload in link handshake message")
        }
        var reply: [UInt8]?
        if !state.isComplete {
            // XX: the responder's message 2 and the initiator's message 3 carry `s` and the binding.
            reply = try state.writeMessage(payload: try prepareLocal())
        }
        if state.isComplete {
            guard let remote = remotePayload else { throw CryptoError("link handshake finished without the peer's identity") }
            let (send, receive) = try state.split()
            result = LinkHandshakeResult(remoteNodeKey: remote.nodeKey, remoteAppPayload: remote.app, send: send, receive: receive,
                                         handshakeHash: state.handshakeHash, datagramKeys: try PairDatagramKeys.derive(from: state))
        }
        return reply
    }

    private mutating func verify(_ payload: [UInt8]) throws {
        guard let remoteStatic = state.remoteStaticKey else { throw CryptoError("link handshake payload before the peer's static key") }
        guard payload.count >= 96 else { throw CryptoError("link handshake payload too short for an identity binding") }
        let nodeKey = Array(payload[0..<32])
        let signature = Array(payload[32..<96])
        guard Identity.verify(signature: signature, message: Self.bindingContext + remoteStatic, publicKey: nodeKey) else {
            throw CryptoError("peer's identity signature does not cover its Noise static key")
        }
        remotePayload = (nodeKey, Array(payload[96...]))
    }
}

/// What a finished link handshake yields: the peer's verified node key and app payload, and the
/// transport ciphers and datagram keys for this side.
public struct LinkHandshakeResult: Sendable {
    public let remoteNodeKey: [UInt8]
    public let remoteAppPayload: [UInt8]
    public var send: NoiseCipherState
    public var receive: NoiseCipherState
    public let handshakeHash: [UInt8]
    /// This link's datagram keys (`PairDatagramKeys`), oriented for this side.
    public let datagramKeys: PairDatagramKeys
}
