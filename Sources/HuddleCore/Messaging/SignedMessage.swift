import HuddleCrypto

/// A message with its origin's signature: the origin signs the Merkle root of one flush of its
/// messages, and each message carries the path from its hash to that root. Any member can relay
/// it (for repair or to a late joiner) and every receiver can check it came from its origin.
public struct SignedMessage: Sendable, Equatable {
    public var message: WireMessage
    public var proof: BatchProof

    public init(message: WireMessage, proof: BatchProof) { self.message = message; self.proof = proof }

    func encode(into w: inout WireWriter) {
        message.encode(into: &w)
        proof.encode(into: &w)
    }

    static func decode(from r: inout WireReader) throws(WireError) -> SignedMessage {
        SignedMessage(message: try WireMessage.decode(from: &r), proof: try BatchProof.decode(from: &r))
    }
}

/// Where a message sits in its signed batch: the origin's signature over the batch root, the
/// message's index among `count` messages, and the sibling hashes up to the root.
public struct BatchProof: Sendable, Equatable {
    public var signature: [UInt8]
    public var index: UInt16
    public var count: UInt16
    public var path: [[UInt8]]

    public static let maximumBatch = 256

    func encode(into w: inout WireWriter) {
        w.raw(signature); w.u16(index); w.u16(count)
        w.u8(UInt8(truncatingIfNeeded: path.count))
        for hash in path { w.raw(hash) }
    }

    static func decode(from r: inout WireReader) throws(WireError) -> BatchProof {
        let signature = try r.raw(64, "batch signature")
        let index = try r.u16("batch index"), count = try r.u16("batch size")
        guard index < count, Int(count) <= maximumBatch else { throw WireError("bad batch index \(index) of \(count)") }
        let depth = Int(try r.u8("proof length"))
        guard depth <= 16 else { throw WireError("proof of \(depth) hashes is too long") }
        var path: [[UInt8]] = []
        for _ in 0..<depth { path.append(try r.raw(32, "proof hash")) }
        return BatchProof(signature: signature, index: index, count: count, path: path)
    }
}

/// Signs and verifies batches of messages (one Ed25519 signature per batch, a Merkle path per message).
public enum MessageBatch {
    static let leafDomain = Array("huddle msg v1".utf8)
    static let signDomain = Array("huddle-batch v1".utf8)

    static func leafHash(_ m: WireMessage) -> [UInt8] {
        var w = WireWriter(capacity: 64 + m.body.count)
        w.raw(leafDomain)
        m.encode(into: &w)
        return BLAKE2b.hash(w.bytes, length: 32)
    }

    static func parent(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] { BLAKE2b.hash([1] + left + right, length: 32) }

    static func signedBytes(origin: MemberID, root: [UInt8]) -> [UInt8] {
        var w = WireWriter(capacity: 64)
        w.raw(signDomain); w.member(origin); w.raw(root)
        return w.bytes
    }

    /// Signs up to `BatchProof.maximumBatch` messages of one origin with one signature.
    public static func sign(_ messages: [WireMessage], identity: Identity) -> [SignedMessage] {
        guard let origin = messages.first?.from else { return [] }
        var levels: [[[UInt8]]] = [messages.map(leafHash)]
        while let top = levels.last, top.count > 1 {
            levels.append(stride(from: 0, to: top.count, by: 2).map { i in i + 1 < top.count ? parent(top[i], top[i + 1]) : top[i] })
        }
        let root = levels.last?.first ?? []
        let signature = identity.sign(signedBytes(origin: origin, root: root))
        return messages.indices.map { i in
            var path: [[UInt8]] = []
            var position = i
            for level in levels.dropLast() {
                let sibling = position ^ 1
                if sibling < level.count { path.append(level[sibling]) }
                position /= 2
            }
            return SignedMessage(message: messages[i], proof: BatchProof(signature: signature, index: UInt16(i), count: UInt16(messages.count), path: path))
        }
    }

    /// The root `signed`'s path leads to, or nil when the path does not fit its index and count.
    static func root(of signed: SignedMessage) -> [UInt8]? {
        var hash = leafHash(signed.message)
        var position = Int(signed.proof.index), width = Int(signed.proof.count)
        var path = signed.proof.path[...]
        while width > 1 {
            let sibling = position ^ 1
            if sibling < width {
                guard let next = path.popFirst() else { return nil }
                hash = position % 2 == 0 ? parent(hash, next) : parent(next, hash)
            }
            position /= 2
            width = (width + 1) / 2
        }
        return path.isEmpty ? hash : nil
    }

    /// Whether `signed` was made by the holder of `originKey`. Verified roots are remembered in
    /// `cache`, so the rest of a batch costs one hash path each.
    public static func verify(_ signed: SignedMessage, originKey: [UInt8], cache: inout VerifiedRoots) -> Bool {
        guard let root = root(of: signed) else { return false }
        let key = signedBytes(origin: signed.message.from, root: root) + signed.proof.signature
        if cache.contains(key) { return true }
        guard Identity.verify(signature: signed.proof.signature, message: signedBytes(origin: signed.message.from, root: root), publicKey: originKey) else {
            return false
        }
        cache.insert(key)
        return true
    }
}

/// Batch roots whose signature has been checked, bounded so it cannot grow without limit.
public struct VerifiedRoots: Sendable {
    private var current: Set<[UInt8]> = []
    private var previous: Set<[UInt8]> = []
    public static let generation = 4096

    public init() {}

    func contains(_ key: [UInt8]) -> Bool { current.contains(key) || previous.contains(key) }

    mutating func insert(_ key: [UInt8]) {
        if current.count >= Self.generation {
            previous = current
            current = []
        }
        current.insert(key)
    }
}
