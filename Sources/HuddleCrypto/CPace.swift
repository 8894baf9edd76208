import CSodium

/// CPace, the balanced password-authenticated key exchange of the CFRG (draft-irtf-cfrg-cpace-21),
/// with the cipher suite CPACE-RISTR255-SHA512: group ristretto255 (RFC 9496, libsodium's
/// `crypto_core_ristretto255_*`), hash SHA-512, in the initiator–responder setting
/// (`transcript_ir`). Test vectors: the draft's appendix "Test vector for CPace using group
/// ristretto255 and hash SHA-512" (CPaceTests).
///
/// Guarantees: both parties derive the same 64-byte ISK exactly when their password (PRS), channel
/// identifier (CI) and session id (sid) match and each saw the other's message; a peer message
/// that does not decode to a group element, or that makes the shared point the identity, throws
/// (`CryptoError`) and never traps.
public enum CPace {
    public static let dsi = Array("CPaceRistretto255".utf8)
    /// SHA-512's input block size: the generator string's zero padding fills one block.
    static let hashBlockBytes = 128
    public static let messageLength = 32
    public static let iskLength = 64

    /// The LEB128 length of `data`, then `data`.
    static func prependLength(_ data: [UInt8]) -> [UInt8] {
        var length = data.count
        var encoded: [UInt8] = []
        repeat {
            encoded.append(length < 128 ? UInt8(length) : UInt8(length & 0x7f) | 0x80)
            length >>= 7
        } while length > 0
        return encoded + data
    }

    static func lvCat(_ parts: [UInt8]...) -> [UInt8] { parts.flatMap(prependLength) }

    /// `lv_cat(DSI, PRS, zero padding, CI, sid)`, the padding making DSI and PRS fill the first hash block.
    static func generatorString(password: [UInt8], channelIdentifier: [UInt8], sessionID: [UInt8]) -> [UInt8] {
        let padding = max(0, hashBlockBytes - 1 - prependLength(password).count - prependLength(dsi).count)
        return lvCat(dsi, password, [UInt8](repeating: 0, count: padding), channelIdentifier, sessionID)
    }

    static func sha512(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        _ = crypto_hash_sha512(&out, data, UInt64(data.count))
        return out
    }

    /// The generator `g` (encoded): RFC 9496's element derivation of SHA-512 of the generator string.
    static func generator(password: [UInt8], channelIdentifier: [UInt8], sessionID: [UInt8]) -> [UInt8] {
        Sodium.initialize()
        let hash = sha512(generatorString(password: password, channelIdentifier: channelIdentifier, sessionID: sessionID))
        var point = [UInt8](repeating: 0, count: 32)
        _ = crypto_core_ristretto255_from_hash(&point, hash)
        return point
    }

    /// `encode(y · decode(point))`; throws when `point` does not decode or the result is the identity.
    static func scalarMult(_ scalar: [UInt8], _ point: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard point.count == 32 else { throw .invalidPoint }
        guard crypto_core_ristretto255_is_valid_point(point) == 1 else { throw .invalidPoint }
        var out = [UInt8](repeating: 0, count: 32)
        // libsodium refuses (-1) exactly when the product is the identity element.
        guard crypto_scalarmult_ristretto255(&out, scalar, point) == 0 else { throw .identityElement }
        return out
    }

    /// A fresh scalar, uniform in [1, order − 1] (the draft's alternative sampling).
    static func sampleScalar() -> [UInt8] {
        Sodium.initialize()
        var scalar = [UInt8](repeating: 0, count: 32)
        repeat { crypto_core_ristretto255_scalar_random(&scalar) } while scalar.allSatisfy { $0 == 0 }
        return scalar
    }

    /// `H.hash(lv_cat(DSI || "_ISK", sid, K) || transcript_ir(Ya, ADa, Yb, ADb))`.
    static func isk(sessionID: [UInt8], shared: [UInt8], initiatorMessage ya: [UInt8], initiatorData ada: [UInt8],
                    responderMessage yb: [UInt8], responderData adb: [UInt8]) -> [UInt8] {
        sha512(lvCat(dsi + Array("_ISK".utf8), sessionID, shared) + lvCat(ya, ada) + lvCat(yb, adb))
    }

    /// Party A: sends `message` (Ya) first, then finishes with the responder's Yb.
    public struct Initiator: Sendable {
        let scalar: [UInt8]
        let sessionID: [UInt8]
        let associatedData: [UInt8]
        /// Ya: the message to send.
        public let message: [UInt8]

        /// `scalar`: injected only by tests (32 bytes, little endian); otherwise sampled.
        public init(password: [UInt8], channelIdentifier: [UInt8], sessionID: [UInt8], associatedData: [UInt8] = [], scalar: [UInt8]? = nil) throws(CryptoError) {
            let y = scalar ?? CPace.sampleScalar()
            guard y.count == 32 else { throw .invalidScalar }
            self.scalar = y
            self.sessionID = sessionID
            self.associatedData = associatedData
            message = try CPace.scalarMult(y, CPace.generator(password: password, channelIdentifier: channelIdentifier, sessionID: sessionID))
        }

        /// The ISK, from the responder's message Yb and associated data ADb.
        public func finish(peerMessage: [UInt8], peerAssociatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
            let shared = try CPace.scalarMult(scalar, peerMessage)
            return CPace.isk(sessionID: sessionID, shared: shared, initiatorMessage: message, initiatorData: associatedData,
                             responderMessage: peerMessage, responderData: peerAssociatedData)
        }
    }

    /// Party B: answers the initiator's Ya with `message` (Yb) and holds the ISK at once.
    public struct Responder: Sendable {
        /// Yb: the message to send back.
        public let message: [UInt8]
        public let isk: [UInt8]

        public init(password: [UInt8], channelIdentifier: [UInt8], sessionID: [UInt8], peerMessage: [UInt8], peerAssociatedData: [UInt8] = [],
                    associatedData: [UInt8] = [], scalar: [UInt8]? = nil) throws(CryptoError) {
            let y = scalar ?? CPace.sampleScalar()
            guard y.count == 32 else { throw .invalidScalar }
            message = try CPace.scalarMult(y, CPace.generator(password: password, channelIdentifier: channelIdentifier, sessionID: sessionID))
            let shared = try CPace.scalarMult(y, peerMessage)
            isk = CPace.isk(sessionID: sessionID, shared: shared, initiatorMessage: peerMessage, initiatorData: peerAssociatedData,
                            responderMessage: message, responderData: associatedData)
        }
    }
}
