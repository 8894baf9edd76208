/// Pairing a new host by a one-time code (issue 22): a CPace exchange over the code, key
/// confirmation both ways, then the session key sealed under a key derived from CPace's ISK.
/// Pure: it reads no socket; the node and `huddle run --invite` carry its frames over one TCP
/// connection to a member's listen port, in link framing (`u16 length | bytes`).
///
///     joiner → member   hello    "huddle-pair v1" | nameplate u32 | sid (16) | Ya (32)
///     member → joiner   answer   Yb (32) | member's confirmation (32)
///                       refusal  "huddle-pair no" | reason (UTF-8)      (then the member closes)
///     joiner → member   confirm  joiner's confirmation (32)
///     member → joiner   key      nonce (24) | AEAD(session key (32) | epoch u64)
///
/// Guarantees: the code never crosses the connection, and neither does anything a passive
/// observer can test a guess of the code against; an active attacker gets one guess per
/// connection (CPace is a balanced PAKE). The member sends its confirmation first and the key only
/// after the joiner's confirmation checked, so a joiner with a wrong code learns only that it was
/// wrong. Confirmations and the key-sealing key are BLAKE2b-256 of distinct labels keyed by the ISK.
public enum PairingHandshake {
    public static let magic = Array("huddle-pair v1".utf8)
    static let refusalMagic = Array("huddle-pair no".utf8)
    static let sessionIDLength = 16
    /// The CPace channel identifier: binds the exchange to this protocol and the invitation.
    static func channelIdentifier(nameplate: UInt32) -> [UInt8] {
        magic + withUnsafeBytes(of: nameplate.bigEndian) { Array($0) }
    }

    /// Whether a first frame on a listen port opens a pairing (and not a link handshake).
    public static func isHello(_ frame: [UInt8]) -> Bool { frame.starts(with: magic) }

    /// A hello's fields.
    public struct Hello: Sendable, Equatable {
        public let nameplate: UInt32
        public let sessionID: [UInt8]
        public let message: [UInt8]
    }

    public static func parseHello(_ frame: [UInt8]) throws(CryptoError) -> Hello {
        let expected = magic.count + 4 + sessionIDLength + CPace.messageLength
        guard isHello(frame), frame.count == expected else { throw .malformed("a pairing hello is \(expected) bytes, not \(frame.count)") }
        var at = magic.count
        let nameplate = frame[at..<at + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        at += 4
        let sid = Array(frame[at..<at + sessionIDLength])
        at += sessionIDLength
        return Hello(nameplate: nameplate, sessionID: sid, message: Array(frame[at...]))
    }

    /// A refusal frame: why the member will not pair (unknown, expired, used or burned invitation).
    public static func refusal(_ reason: String) -> [UInt8] { refusalMagic + Array(reason.utf8.prefix(200)) }

    static func confirmation(_ isk: [UInt8], role: String) -> [UInt8] {
        BLAKE2b.hash(Array("huddle-pair confirm \(role)".utf8), length: 32, key: Array(isk.prefix(64)))
    }

    static func sealingKey(_ isk: [UInt8]) -> [UInt8] {
        BLAKE2b.hash(Array("huddle-pair session key".utf8), length: 32, key: Array(isk.prefix(64)))
    }

    /// The new host's side.
    public struct Joiner: Sendable {
        let nameplate: UInt32
        let sessionID: [UInt8]
        let cpace: CPace.Initiator
        var isk: [UInt8]?

        /// `password`: the invitation code in its normalised form; `nameplate`: the number it starts with.
        public init(nameplate: UInt32, password: [UInt8], sessionID: [UInt8] = SecureRandom.bytes(16), scalar: [UInt8]? = nil) throws(CryptoError) {
            self.nameplate = nameplate
            self.sessionID = sessionID
            do {
                cpace = try CPace.Initiator(password: password, channelIdentifier: PairingHandshake.channelIdentifier(nameplate: nameplate),
                                            sessionID: sessionID, scalar: scalar)
            } catch { throw .malformed("cannot start CPace: \(error)") }
        }

        /// The first frame.
        public var hello: [UInt8] { magic + withUnsafeBytes(of: nameplate.bigEndian) { Array($0) } + sessionID + cpace.message }

        /// The member's answer: checks its confirmation and returns the joiner's. Throws
        /// `.refused` with the member's reason, or `.wrongCode` when the confirmation does not check.
        public mutating func receiveAnswer(_ frame: [UInt8]) throws(CryptoError) -> [UInt8] {
            if frame.starts(with: refusalMagic) { throw .refused(String(decoding: frame.dropFirst(refusalMagic.count), as: UTF8.self)) }
            guard frame.count == CPace.messageLength + 32 else { throw .malformed("a pairing answer is \(CPace.messageLength + 32) bytes, not \(frame.count)") }
            let isk: [UInt8]
            do { isk = try cpace.finish(peerMessage: Array(frame.prefix(CPace.messageLength))) } catch { throw .wrongCode }
            guard constantTimeEqual(Array(frame.suffix(32)), confirmation(isk, role: "member")) else { throw .wrongCode }
            self.isk = isk
            return confirmation(isk, role: "joiner")
        }

        /// The last frame: the session key with its epoch, session id, head (issue 21) and admin set
        /// (issue 33: node keys after the head; none without admins, and older builds refuse a
        /// record with them as malformed). A
        /// record of the key and epoch alone (before epochs were carried whole) is accepted at
        /// epoch 0, where the key names its own session id and head.
        public func receiveKey(_ frame: [UInt8]) throws(CryptoError) -> SessionKey {
            guard let isk else { throw .malformed("a key before the answer") }
            guard frame.count > AEAD.nonceLength else { throw .malformed("a sealed key of \(frame.count) bytes") }
            let plain: [UInt8]
            do {
                plain = try AEAD.open(Array(frame.dropFirst(AEAD.nonceLength)), ad: magic, nonce: Array(frame.prefix(AEAD.nonceLength)), key: sealingKey(isk))
            } catch { throw .malformed("the sealed key does not open") }
            let base = SessionKey.length + 8
            let whole = base + SessionKey.sessionIDLength + SessionKey.headLength
            // A record with admins (issue 33) carries them after the head, one node key each.
            let adminBytes = plain.count - whole
            guard plain.count == base || (adminBytes >= 0 && adminBytes % SessionKey.adminKeyLength == 0
                                          && adminBytes / SessionKey.adminKeyLength <= SessionKey.maxAdmins) else {
                throw .malformed("a session key record of \(plain.count) bytes")
            }
            let bytes = Array(plain.prefix(SessionKey.length))
            let epoch = plain[SessionKey.length..<base].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            do {
                guard plain.count > base else {
                    guard epoch == 0 else { throw CryptoError.malformed("an epoch \(epoch) key without its session id and head") }
                    return try SessionKey(bytes: bytes)
                }
                let session = Array(plain[base..<(base + SessionKey.sessionIDLength)])
                let head = Array(plain[(base + SessionKey.sessionIDLength)..<whole])
                let admins = stride(from: whole, to: plain.count, by: SessionKey.adminKeyLength).map { Array(plain[$0..<($0 + SessionKey.adminKeyLength)]) }
                return try SessionKey(bytes: bytes, epoch: epoch, sessionID: session, head: head, admins: admins)
            } catch let error as CryptoError where error.code == .malformed { throw error } catch { throw .malformed("the session key record: \(error)") }
        }
    }

    /// The member's side, for one hello whose invitation it found (`password`: that code, normalised).
    public struct Member: Sendable {
        let isk: [UInt8]
        /// The answer frame.
        public let answer: [UInt8]

        public init(hello: Hello, password: [UInt8], scalar: [UInt8]? = nil) throws(CryptoError) {
            let responder: CPace.Responder
            do {
                responder = try CPace.Responder(password: password, channelIdentifier: PairingHandshake.channelIdentifier(nameplate: hello.nameplate),
                                                sessionID: hello.sessionID, peerMessage: hello.message, scalar: scalar)
            } catch { throw .malformed("the joiner's CPace message is not a valid point") }
            isk = responder.isk
            answer = responder.message + confirmation(isk, role: "member")
        }

        /// Whether the joiner's confirmation checks (it knows the code).
        public func confirms(_ frame: [UInt8]) -> Bool {
            frame.count == 32 && constantTimeEqual(frame, confirmation(isk, role: "joiner"))
        }

        /// The key frame: the session key of the current epoch with its epoch number, session id,
        /// head and admin set, sealed for the joiner (a newly paired node starts on the current epoch).
        public func sealKey(_ key: SessionKey, nonce: [UInt8] = AEAD.randomNonce()) -> [UInt8] {
            let plain = key.bytes + withUnsafeBytes(of: key.epoch.bigEndian) { Array($0) } + key.sessionID + key.head + key.admins.joined()
            return nonce + AEAD.seal(plain, ad: magic, nonce: nonce, key: sealingKey(isk))
        }
    }
}

/// Compares two byte strings in time that depends only on their lengths.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}
