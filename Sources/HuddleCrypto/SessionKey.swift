import CSodium
import Foundation

/// What a session subkey is for; each purpose gets an independent key from the KDF.
public enum SessionSubkey: UInt64, Sendable {
    case handshakePSK = 1, datagram = 2, chunkHeader = 3
}

/// The 32-byte secret every member of a session holds, in one **epoch** of the session. Never used
/// directly: `subkey(_:)` derives one key per purpose from this epoch's key; `fingerprint` names the
/// session without revealing it, the same in every epoch.
///
/// A session starts at epoch 0 with the key `huddle keygen` made; each epoch change (`remove`,
/// `rekey`) moves it to a new random key, `epoch` one higher. `sessionID` (the fingerprint of epoch 0)
/// and `head` (the hash of the epoch change that made this epoch; `genesisHead(sessionID:)` at
/// epoch 0) travel with the key so a restarted member names the session and links the epoch changes
/// it missed to the epoch it holds.
///
/// Key files: `v1` (`huddle-session-key v1 <base64>`) is epoch 0 — every file made before epochs
/// existed, and what `write(to:)` still writes at epoch 0, so nothing that reads v1 changes — and
/// `v2` (`huddle-session-key v2 <epoch> <session id, 16 hex> <head, 64 hex> <base64>`) any epoch.
/// `load` reads both. Subkeys are derived from `bytes` exactly as before epochs existed, so an
/// epoch-0 key derives today's subkeys and a v1 file works unchanged.
///
/// **Admins** (issue 33): the node keys that alone may make epoch changes are part of the session's
/// signed state, not per-node configuration. `huddle keygen --admin` fixes them with the key, and
/// they travel with it (key file, pairing, `EpochMemory`); every epoch change carries, signed, the
/// admin set of the epoch it makes (`EpochChange.admins`). A key with admins is bound to them: epoch
/// 0's session id is a hash over the key *and* the admin set, and every subkey is derived from the
/// key keyed with the admin set, so two nodes that disagree on the admin set of an epoch hold
/// different link PSKs and cannot link (nor open each other's datagrams): an edited admin list puts
/// a node outside the session, it never forks it. Without admins nothing changes (v1/v2 files, the
/// same session id and subkeys as before). A key file with admins is `v3` (`huddle-session-key v3
/// <epoch> <session id> <head> <admin node keys, hex, comma-separated> <base64>`); builds before
/// it refuse such a file as an unsupported version.
public struct SessionKey: Sendable, Equatable {
    public static let length = 32
    /// Bytes of a session id (the fingerprint of epoch 0).
    public static let sessionIDLength = 8
    /// Bytes of a head (an epoch change's hash).
    public static let headLength = 32
    static let fileHeader = "huddle-session-key"

    /// This epoch's key.
    public let bytes: [UInt8]
    /// The epoch number: 0 for a new session, one more at each epoch change.
    public let epoch: UInt64
    /// Names the session across epochs: the first 8 bytes of the fingerprint hash of epoch 0's key.
    public let sessionID: [UInt8]
    /// The hash of the epoch change that made this epoch (`genesisHead(sessionID:)` at epoch 0).
    public let head: [UInt8]
    /// The node keys that may make epoch changes in this epoch, sorted and unique (empty: every
    /// member may). See the note above: the key is bound to them.
    public let admins: [[UInt8]]

    /// Most admins a session has (a key file line holds them all).
    public static let maxAdmins = 32
    /// Bytes of an admin node key.
    public static let adminKeyLength = 32

    /// The key of epoch 0 of a session (with `admins`, a session bound to them: see above).
    public init(bytes: [UInt8], admins: [[UInt8]] = []) throws {
        guard bytes.count == Self.length else { throw CryptoError("a session key is \(Self.length) bytes, not \(bytes.count)") }
        self.init(unchecked: bytes, admins: try Self.canonicalAdmins(admins))
    }

    /// The key of any epoch; at epoch 0 the session id and head must be the ones `bytes` and
    /// `admins` derive (an edited admin list or session id is refused here).
    public init(bytes: [UInt8], epoch: UInt64, sessionID: [UInt8], head: [UInt8], admins: [[UInt8]] = []) throws {
        guard bytes.count == Self.length else { throw CryptoError("a session key is \(Self.length) bytes, not \(bytes.count)") }
        guard sessionID.count == Self.sessionIDLength else { throw CryptoError("a session id is \(Self.sessionIDLength) bytes, not \(sessionID.count)") }
        guard head.count == Self.headLength else { throw CryptoError("an epoch head is \(Self.headLength) bytes, not \(head.count)") }
        let admins = try Self.canonicalAdmins(admins)
        if epoch == 0 {
            let genesis = SessionKey(unchecked: bytes, admins: admins)
            guard genesis.sessionID == sessionID, genesis.head == head else {
                throw CryptoError("an epoch-0 key names its own session id and head (from the key and its admin set); these are another's")
            }
        }
        self.bytes = bytes
        self.epoch = epoch
        self.sessionID = sessionID
        self.head = head
        self.admins = admins
    }

    public static func generate(admins: [[UInt8]] = []) throws -> SessionKey {
        SessionKey(unchecked: SecureRandom.bytes(length), admins: try canonicalAdmins(admins))
    }

    public static func generate() -> SessionKey {
        SessionKey(unchecked: SecureRandom.bytes(length), admins: [])
    }

    private init(unchecked bytes: [UInt8], admins: [[UInt8]]) {
        self.bytes = bytes
        epoch = 0
        self.admins = admins
        let bound = admins.isEmpty ? [] : Array("huddle admins".utf8) + admins.joined()
        sessionID = Array(BLAKE2b.hash(Array("huddle fingerprint".utf8) + bytes + bound, length: 32).prefix(Self.sessionIDLength))
        head = Self.genesisHead(sessionID: sessionID)
    }

    /// `admins` sorted and unique, each `adminKeyLength` bytes, at most `maxAdmins`.
    public static func canonicalAdmins(_ admins: [[UInt8]]) throws -> [[UInt8]] {
        guard admins.allSatisfy({ $0.count == adminKeyLength }) else { throw CryptoError("an admin is a node key of \(adminKeyLength) bytes") }
        var out: [[UInt8]] = []
        for key in admins.sorted(by: { $0.lexicographicallyPrecedes($1) }) where out.last != key { out.append(key) }
        guard out.count <= maxAdmins else { throw CryptoError("a session has at most \(maxAdmins) admins, not \(out.count)") }
        return out
    }

    /// The head of epoch 0: the parent every first epoch change names. Derived from the session id
    /// alone, so it reveals nothing the fingerprint does not.
    public static func genesisHead(sessionID: [UInt8]) -> [UInt8] {
        BLAKE2b.hash(Array("huddle epoch genesis".utf8) + sessionID, length: headLength)
    }

    /// The key file's line: v1 at epoch 0, v2 otherwise; v3 whenever the session has admins.
    var fileLine: String {
        let key = Data(bytes).base64EncodedString()
        if !admins.isEmpty {
            return "\(Self.fileHeader) v3 \(epoch) \(hexString(sessionID)) \(hexString(head)) \(admins.map(hexString).joined(separator: ",")) \(key)\n"
        }
        if epoch == 0 { return "\(Self.fileHeader) v1 \(key)\n" }
        return "\(Self.fileHeader) v2 \(epoch) \(hexString(sessionID)) \(hexString(head)) \(key)\n"
    }

    /// Writes the key as a new file with mode 0600; refuses to overwrite an existing file.
    public func write(to path: String) throws { try KeyFile.create(line: fileLine, at: path) }

    /// Replaces the key file at `path` (which must load) by this key, atomically (a temporary file
    /// in the same directory, mode 0600, `fsync`, `rename`, `fsync` of the directory): for a member
    /// moving to a new epoch, so a restart keeps it. A crash leaves the old key or the new one.
    public func rewrite(at path: String) throws {
        try KeyFile.replace(path, line: fileLine, header: Self.fileHeader, what: "key file")
    }

    /// Loads a key file (v1, v2 or v3), refusing group/other-readable files and malformed contents.
    public static func load(from path: String) throws -> SessionKey {
        let what = "key file"
        let (version, fields) = try KeyFile.readFields(path, header: fileHeader, what: what)
        switch (version, fields.count) {
        case ("v1", 1):
            return SessionKey(unchecked: try KeyFile.secret(fields[0], length: length, what: what, path: path), admins: [])
        case ("v3", 5):
            let admins = fields[3].split(separator: ",", omittingEmptySubsequences: false).map { bytesFromHex(String($0)) }
            guard !admins.isEmpty, admins.allSatisfy({ $0?.count == adminKeyLength }) else {
                throw CryptoError("\(what) \(path) is malformed: its admins are not node keys (64 hex digits, comma-separated)")
            }
            return try loadFields(Array(fields[0..<3]) + [fields[4]], admins: admins.compactMap { $0 }, what: what, path: path)
        case ("v2", 4):
            return try loadFields(fields, admins: [], what: what, path: path)
        case ("v1", _), ("v2", _), ("v3", _):
            throw CryptoError("\(what) \(path) is malformed: expected one line \"\(fileHeader) v1 <base64>\", \"\(fileHeader) v2 <epoch> <session> <head> <base64>\" or \"\(fileHeader) v3 <epoch> <session> <head> <admins> <base64>\"")
        default:
            throw CryptoError("\(what) \(path) has unsupported version \(version) (this huddle reads v1, v2 and v3)")
        }
    }

    /// The fields of a v2 line (epoch, session id, head, key), or of a v3 line without its admins.
    private static func loadFields(_ fields: [String], admins: [[UInt8]], what: String, path: String) throws -> SessionKey {
        guard let epoch = UInt64(fields[0]), String(epoch) == fields[0] else {
            throw CryptoError("\(what) \(path) is malformed: its epoch \(fields[0]) is not a number")
        }
        guard let session = bytesFromHex(fields[1]), session.count == sessionIDLength else {
            throw CryptoError("\(what) \(path) is malformed: its session id is not \(sessionIDLength * 2) hex digits")
        }
        guard let head = bytesFromHex(fields[2]), head.count == headLength else {
            throw CryptoError("\(what) \(path) is malformed: its head is not \(headLength * 2) hex digits")
        }
        let key = try KeyFile.secret(fields[3], length: length, what: what, path: path)
        do { return try SessionKey(bytes: key, epoch: epoch, sessionID: session, head: head, admins: admins) } catch {
            throw CryptoError("\(what) \(path) is malformed: \(error)")
        }
    }

    /// 16 hex digits naming the session in every epoch: the session id (for epoch 0, the first
    /// 8 bytes of a BLAKE2b-256 of the key under its own context, as before epochs existed).
    public var fingerprint: String { hexString(sessionID) }

    /// A one-way commitment to this epoch's key (BLAKE2b-256 under its own context): an epoch change
    /// publishes it so every recipient, and every member handed the key later, checks it holds the
    /// same key as everyone else.
    public static func keyCheck(_ bytes: [UInt8]) -> [UInt8] {
        BLAKE2b.hash(Array("huddle epoch key check".utf8) + bytes, length: 32)
    }

    /// A subkey of this epoch's key; with admins, of the key keyed with the admin set (bound to it).
    public func subkey(_ purpose: SessionSubkey) -> [UInt8] {
        Sodium.initialize()
        var out = [UInt8](repeating: 0, count: 32)
        let context: [CChar] = Array("huddle01".utf8CString.prefix(8))
        let master = admins.isEmpty ? bytes : BLAKE2b.hash(Array("huddle admins bound".utf8) + admins.joined(), length: 32, key: bytes)
        _ = crypto_kdf_derive_from_key(&out, 32, purpose.rawValue, context, master)
        return out
    }
}
