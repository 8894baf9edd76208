/// The datagram keys of one link: one XChaCha20-Poly1305 key per direction and a 32-bit id for
/// each, oriented for one end (`send` is the other end's `receive`).
///
/// Guarantees: derived from the finished link handshake's chaining key (`export`, label
/// `huddle datagram keys v1`), which holds every DH result of the handshake, so only the two
/// ends of that one link hold them — not another member, not a key holder who recorded the
/// handshake (the handshake hash would not do: it is computable from the PSK and the transcript),
/// and not anyone after both ends dropped them (forward secrecy). Two links, even between the
/// same two members, get unrelated keys. The ids only pick the key on receipt; they are not secret.
public struct PairDatagramKeys: Sendable {
    public static let label = Array("huddle datagram keys v1".utf8)

    public let send: [UInt8]
    public let receive: [UInt8]
    public let sendID: UInt32
    public let receiveID: UInt32

    /// Keys that stand for a link's in the simulator and in tests: expanded from `seed` with
    /// BLAKE2b, oriented as the link's initiator holds them (`reversed` for the responder).
    public init(seed: [UInt8]) {
        let context = Array("huddle datagram keys seed".utf8)
        let keys = BLAKE2b.hash(context + [1] + seed, length: 64), ids = BLAKE2b.hash(context + [2] + seed, length: 16)
        send = Array(keys[0..<32]); receive = Array(keys[32..<64])
        sendID = ids[0..<4].reduce(0) { $0 << 8 | UInt32($1) }
        receiveID = ids[4..<8].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The same keys as the other end of the link holds them.
    public var reversed: PairDatagramKeys {
        PairDatagramKeys(unchecked: receive, receive: send, sendID: receiveID, receiveID: sendID)
    }

    private init(unchecked send: [UInt8], receive: [UInt8], sendID: UInt32, receiveID: UInt32) {
        self.send = send; self.receive = receive; self.sendID = sendID; self.receiveID = receiveID
    }

    /// The keys of a finished handshake, for the side that was its initiator or its responder.
    public static func derive(from handshake: NoiseHandshakeState) throws -> PairDatagramKeys {
        let out = try handshake.export(label: label)
        let toResponder = Array(out[0].prefix(AEAD.keyLength)), toInitiator = Array(out[1].prefix(AEAD.keyLength))
        func id(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 << 8 | UInt32(out[2][at + $1]) } }
        let (toResponderID, toInitiatorID) = (id(0), id(4))
        return handshake.initiator
            ? PairDatagramKeys(unchecked: toResponder, receive: toInitiator, sendID: toResponderID, receiveID: toInitiatorID)
            : PairDatagramKeys(unchecked: toInitiator, receive: toResponder, sendID: toInitiatorID, receiveID: toResponderID)
    }
}
