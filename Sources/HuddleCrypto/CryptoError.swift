/// Every error HuddleCrypto throws: what failed (`code`, which a program matches) and the one
/// line a person reads (`description`, with its context). As swift-nio-ssh's `NIOSSHError`, one
/// type for the module; never a trap: every bad input is one of these.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed.
    public enum Code: Sendable, Equatable {
        /// A primitive refused its input (a key of the wrong length, a tag that does not verify,
        /// a Noise message out of order, …): `context` says which.
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

    public let code: Code
    /// The failure in one line, with its context.
    public let context: String

    public init(_ code: Code, _ context: String) {
        self.code = code
        self.context = context
    }

    /// A primitive refused its input (`Code.failed`).
    public init(_ context: String) { self.init(.failed, context) }

    public var description: String { context }

    public static func refused(_ reason: String) -> CryptoError { CryptoError(.pairingRefused, "the member refused the invitation: \(reason)") }
    public static let wrongCode = CryptoError(.wrongCode, "the code is wrong (check it with the person who made it; each wrong try counts, and 3 burn the invitation)")
    public static func malformed(_ what: String) -> CryptoError { CryptoError(.malformed, "pairing failed: \(what)") }
    public static let badNodeKey = CryptoError(.badNodeKey, "not a node key that can be sealed to")
    public static let badSeed = CryptoError(.badSeed, "an ephemeral seed is 32 bytes")
    public static func tooShort(_ count: Int) -> CryptoError {
        CryptoError(.tooShort, "a sealed box of \(count) bytes is shorter than its \(SealedBox.overhead)-byte overhead")
    }
    public static let doesNotOpen = CryptoError(.doesNotOpen, "the sealed box does not open with this identity")
    public static let invalidPoint = CryptoError(.invalidPoint, "not the encoding of a ristretto255 element")
    public static let identityElement = CryptoError(.identityElement, "the shared point is the identity element")
    public static let invalidScalar = CryptoError(.invalidScalar, "a scalar is 32 bytes")
}
