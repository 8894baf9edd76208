import HuddleCrypto

/// What names and checks an attachment: its size, how it is cut, the hash of every encrypted chunk,
/// its metadata, its uploader and a hash of its attachment key — signed by the uploader. The
/// attachment id is a hash of the signed fields, so a manifest cannot be altered without changing
/// the id, and a journal entry cannot pair it with another key (`commits(to:)`).
public struct Manifest: Sendable, Equatable {
    public static let defaultChunkSize = 256 * 1024
    public static let maximumSize = 104_857_600
    public static let maximumMeta = 16 * 1024

    public var name: String { didSet { id = Self.id(of: signedFields()) } }
    public var size: UInt64 { didSet { id = Self.id(of: signedFields()) } }
    public var chunkSize: UInt32 { didSet { id = Self.id(of: signedFields()) } }
    /// BLAKE2b-256 of each encrypted chunk, in order.
    public var chunkHashes: [[UInt8]] { didSet { id = Self.id(of: signedFields()) } }
    /// Metadata as JSON text.
    public var meta: [UInt8] { didSet { id = Self.id(of: signedFields()) } }
    public var uploader: MemberID { didSet { id = Self.id(of: signedFields()) } }
    public var uploaderNodeKey: [UInt8] { didSet { id = Self.id(of: signedFields()) } }
    /// BLAKE2b-256 of the attachment key (`keyHash(_:)`), set by `sign(with:key:)`.
    public var keyHash: [UInt8] { didSet { id = Self.id(of: signedFields()) } }
    public var signature: [UInt8]
    /// 32 hex digits naming the attachment: a hash of the signed fields, computed when the
    /// manifest is made and again whenever one of them changes (the store names its file by it on
    /// every chunk read and write, and hashing every chunk hash each time cost a receiver's CPU).
    public private(set) var id: String = ""

    public init(name: String, size: UInt64, chunkSize: UInt32, chunkHashes: [[UInt8]], meta: [UInt8], uploader: MemberID, uploaderNodeKey: [UInt8], keyHash: [UInt8] = [], signature: [UInt8]) {
        self.name = name; self.size = size; self.chunkSize = chunkSize; self.chunkHashes = chunkHashes
        self.meta = meta; self.uploader = uploader; self.uploaderNodeKey = uploaderNodeKey; self.keyHash = keyHash; self.signature = signature
        id = Self.id(of: signedFields())
    }

    public var chunkCount: Int { chunkHashes.count }

    private static func id(of signedFields: [UInt8]) -> String {
        hexString(BLAKE2b.hash(Array("huddle manifest v1".utf8) + signedFields, length: 16))
    }

    /// Bytes of plaintext in chunk `index`.
    public func plainLength(of index: Int) -> Int {
        let start = UInt64(index) * UInt64(chunkSize)
        return Int(min(UInt64(chunkSize), size - min(size, start)))
    }

    func signedFields() -> [UInt8] {
        var w = WireWriter(capacity: 128 + chunkHashes.count * 32)
        w.string16(name); w.u64(size); w.u32(chunkSize)
        w.u32(UInt32(chunkHashes.count))
        for h in chunkHashes { w.raw(h) }
        w.bytes32(meta); w.member(uploader); w.raw(uploaderNodeKey); w.raw(keyHash)
        return w.bytes
    }

    /// What a manifest commits to for an attachment key.
    public static func keyHash(_ key: [UInt8]) -> [UInt8] { BLAKE2b.hash(Array("huddle attachment key v1".utf8) + key, length: 32) }

    /// Commits to `key` and signs with the uploader's identity.
    public mutating func sign(with identity: Identity, key: [UInt8]) {
        keyHash = Self.keyHash(key)
        signature = identity.sign(signedFields())
    }

    /// Whether `key` is the attachment key this manifest was signed for.
    public func commits(to key: [UInt8]) -> Bool { key.count == 32 && keyHash == Self.keyHash(key) }

    /// The manifest is internally consistent and signed by the node key it names.
    public func isValid() -> Bool {
        guard size <= UInt64(Self.maximumSize), chunkSize > 0, meta.count <= Self.maximumMeta,
              chunkHashes.count == Int((size + UInt64(chunkSize) - 1) / UInt64(chunkSize)),
              chunkHashes.allSatisfy({ $0.count == 32 }), uploaderNodeKey.count == 32, keyHash.count == 32 else { return false }
        return Identity.verify(signature: signature, message: signedFields(), publicKey: uploaderNodeKey)
    }

    func encode(into w: inout WireWriter) {
        w.raw(signedFields()); w.raw(signature)
    }

    static func decode(from r: inout WireReader) throws(CoreError) -> Manifest {
        let name = try r.string16("attachment name")
        let size = try r.u64("attachment size")
        let chunkSize = try r.u32("chunk size")
        let count = Int(try r.u32("chunk count"))
        guard count <= Self.maximumSize / 1024 + 1, count * 32 <= r.remaining else { throw CoreError("bad chunk count \(count)") }
        var hashes: [[UInt8]] = []
        hashes.reserveCapacity(count)
        for _ in 0..<count { hashes.append(try r.raw(32, "chunk hash")) }
        let meta = try r.bytes32(limit: maximumMeta, "attachment metadata")
        let uploader = try r.member("uploader")
        let node = try r.raw(32, "uploader key")
        let keyHash = try r.raw(32, "attachment key hash")
        let signature = try r.raw(64, "manifest signature")
        return Manifest(name: name, size: size, chunkSize: chunkSize, chunkHashes: hashes, meta: meta, uploader: uploader, uploaderNodeKey: node, keyHash: keyHash, signature: signature)
    }
}

/// Encrypts chunks under an attachment's own key. The nonce is the chunk index: each key is
/// random and used for one attachment only, so (key, nonce) never repeats.
public enum ChunkCipher {
    static func nonce(_ index: Int) -> [UInt8] {
        var n = [UInt8](repeating: 0, count: AEAD.nonceLength)
        for i in 0..<8 { n[i] = UInt8(truncatingIfNeeded: index >> (8 * i)) }
        return n
    }

    public static func seal(_ plain: [UInt8], index: Int, key: [UInt8]) -> [UInt8] {
        AEAD.seal(plain, ad: Array("huddle chunk v1".utf8), nonce: nonce(index), key: key)
    }

    public static func open(_ sealed: [UInt8], index: Int, key: [UInt8]) throws -> [UInt8] {
        try AEAD.open(sealed, ad: Array("huddle chunk v1".utf8), nonce: nonce(index), key: key)
    }

    public static func hash(_ sealed: [UInt8]) -> [UInt8] { BLAKE2b.hash(sealed, length: 32) }

    /// The same hash of a sealed chunk given in parts (`BLAKE2b.hash(length:_:)`).
    public static func hash(parts feed: ((UnsafeRawBufferPointer) -> Void) -> Void) -> [UInt8] { BLAKE2b.hash(length: 32, feed) }
}

/// An entry of the session's journal, carried by causal broadcast so every member applies the
/// same adds and removes in the same causal order.
public enum JournalEntry: Sendable, Equatable {
    case add(Manifest, key: [UInt8])
    case remove(id: String)

    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: 256)
        w.u8(1)
        switch self {
        case let .add(manifest, key): w.u8(1); manifest.encode(into: &w); w.raw(key)
        case let .remove(id): w.u8(2); w.string16(id)
        }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> JournalEntry {
        var r = WireReader(bytes)
        guard try r.u8("journal version") == 1 else { throw CoreError("unsupported journal entry version") }
        let entry: JournalEntry
        switch try r.u8("journal kind") {
        case 1: entry = .add(try Manifest.decode(from: &r), key: try r.raw(32, "attachment key"))
        case 2: entry = .remove(id: try r.string16("attachment id"))
        default: throw CoreError("unknown journal entry")
        }
        try r.expectEnd("journal entry")
        return entry
    }
}
