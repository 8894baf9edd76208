import HuddleErrors

/// Every error HuddleCrypto throws: what failed (`code`, which a program matches) and the one
/// line a person reads (`message`, with its context). As swift-nio-ssh's `NIOSSHError`, one
/// type for the module; never a trap: every bad input is one of these.
public typealias CryptoError = CodedError<CryptoErrorCode>

/// What failed (`CryptoError.code`): a program matches it; the payload is what a caller acts on.
public enum CryptoErrorCode: ErrorCode {
    /// A primitive refused its input (a key of the wrong length, a tag that does not verify,
    /// a Noise message out of order, …): `message` says which.
    case failed
    /// Pairing: the member refused the invitation before the exchange.
    case pairingRefused
    /// Pairing: the key confirmation failed (a wrong or mistyped code, or someone in between).
    case wrongCode
    /// Pairing: a frame that does not follow the protocol.
    case malformed
    /// Sealed box: not a node key that can be sealed to (not 32 bytes, or no X25519 key).
    case badNodeKey
    /// Sealed box: an ephemeral seed that is not 32 bytes.
    case badSeed
    /// Sealed box: shorter than its overhead (`SealedBox.overhead`).
    case tooShort
    /// Sealed box: not sealed to this identity, or changed on the way.
    case doesNotOpen
    /// CPace: the peer's message is not the encoding of a ristretto255 element.
    case invalidPoint
    /// CPace: the shared point is the identity (the draft says abort).
    case identityElement
    /// CPace: an injected scalar that is not 32 bytes.
    case invalidScalar
}

extension CodedError where Codes == CryptoErrorCode {
    /// A primitive refused its input (`Code.failed`).
    public init(_ message: String) { self.init(.failed, message) }

    public static func refused(_ reason: String) -> CryptoError { CryptoError(.pairingRefused, "the member refused the invitation: \(reason)") }
    public static var wrongCode: CryptoError { CryptoError(.wrongCode, "the code is wrong (check it with the person who made it; each wrong try counts, and 3 burn the invitation)") }
    public static func malformed(_ what: String) -> CryptoError { CryptoError(.malformed, "pairing failed: \(what)") }
    public static var badNodeKey: CryptoError { CryptoError(.badNodeKey, "not a node key that can be sealed to") }
    public static var badSeed: CryptoError { CryptoError(.badSeed, "an ephemeral seed is 32 bytes") }
    public static func tooShort(_ count: Int) -> CryptoError {
        CryptoError(.tooShort, "a sealed box of \(count) bytes is shorter than its \(SealedBox.overhead)-byte overhead")
    }
    public static var doesNotOpen: CryptoError { CryptoError(.doesNotOpen, "the sealed box does not open with this identity") }
    public static var invalidPoint: CryptoError { CryptoError(.invalidPoint, "not the encoding of a ristretto255 element") }
    public static var identityElement: CryptoError { CryptoError(.identityElement, "the shared point is the identity element") }
    public static var invalidScalar: CryptoError { CryptoError(.invalidScalar, "a scalar is 32 bytes") }
}
