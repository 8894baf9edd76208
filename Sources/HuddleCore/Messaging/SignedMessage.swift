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

    static func decode(from r: inout WireReader) throws(CoreError) -> SignedMessage {
        SignedMessage(message: try WireMessage.decode(from: &r), proof: try BatchProof.decode(from: &r))
    }
}

extension SignedMessage: StoredForm {
    /// The stored form (a restart's own messages, `ResumePoint`).
    public func encoded() -> [UInt8] { storedBytes(capacity: message.body.count + 256) }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> SignedMessage { try decodeWhole(bytes, "stored message") }
}

/// Where a message sits in its signed batch: the origin's signature over the batch root, the
/// message's index among `count` messages, and the sibling hashes up to the root — taken from the
/// batch's tree when this member holds it (it received the whole batch), else as relayed.
public struct BatchProof: Sendable, Equatable {
    public var signature: [UInt8]
    public var index: UInt16
    public var count: UInt16
    private var relayedPath: [[UInt8]]
    private(set) var tree: BatchTree?

    public static let maximumBatch = 256

    public init(signature: [UInt8], index: UInt16, count: UInt16, path: [[UInt8]]) {
        self.signature = signature; self.index = index; self.count = count; relayedPath = path; tree = nil
    }

    init(signature: [UInt8], index: UInt16, tree: BatchTree) {
        self.signature = signature; self.index = index; count = UInt16(tree.count); relayedPath = []; self.tree = tree
    }

    public var path: [[UInt8]] { tree?.path(Int(index)) ?? relayedPath }

    public static func == (a: BatchProof, b: BatchProof) -> Bool {
        a.signature == b.signature && a.index == b.index && a.count == b.count && a.path == b.path
    }

    func encode(into w: inout WireWriter) {
        let path = self.path
        w.raw(signature); w.u16(index); w.u16(count)
        w.u8(UInt8(truncatingIfNeeded: path.count))
        for hash in path { w.raw(hash) }
    }

    static func decode(from r: inout WireReader) throws(CoreError) -> BatchProof {
        let signature = try r.raw(64, "batch signature")
        let index = try r.u16("batch index"), count = try r.u16("batch size")
        guard index < count, Int(count) <= maximumBatch else { throw CoreError("bad batch index \(index) of \(count)") }
        let depth = Int(try r.u8("proof length"))
        guard depth <= 16 else { throw CoreError("proof of \(depth) hashes is too long") }
        var path: [[UInt8]] = []
        for _ in 0..<depth { path.append(try r.raw(32, "proof hash")) }
        return BatchProof(signature: signature, index: index, count: count, path: path)
    }
}

/// Signs and verifies batches of messages (one Ed25519 signature per batch over the root of a
/// Merkle tree of its messages; a message relayed alone carries its path to that root).
public enum MessageBatch {
    static let signDomain = Array("huddle-batch v2".utf8)

    static func leafHash(_ m: WireMessage) -> [UInt8] {
        var scratch = WireWriter(capacity: 64 + m.body.count)
        var out = [UInt8](repeating: 0, count: BatchTree.hashLength)
        out.withUnsafeMutableBytes { leafHash(m, scratch: &scratch, into: $0) }
        return out
    }

    /// Encodes `m` into `scratch` (reused across a batch) and writes its leaf hash to `out`.
    private static func leafHash(_ m: WireMessage, scratch: inout WireWriter, into out: UnsafeMutableRawBufferPointer) {
        scratch.reset()
        m.encode(into: &scratch)
        scratch.bytes.withUnsafeBytes { BatchTree.leafHash(ofEncoded: $0, into: out) }
    }

    static func signedBytes(origin: MemberID, root: [UInt8]) -> [UInt8] {
        var w = WireWriter(capacity: 64)
        w.raw(signDomain); w.member(origin); w.raw(root)
        return w.bytes
    }

    /// Signs up to `BatchProof.maximumBatch` messages of one origin with one signature.
    public static func sign(_ messages: [WireMessage], identity: Identity) -> [SignedMessage] {
        guard let origin = messages.first?.origin else { return [] }
        var leaves = [UInt8](repeating: 0, count: messages.count * BatchTree.hashLength)
        var scratch = WireWriter(capacity: 512)
        leaves.withUnsafeMutableBytes { out in
            for (i, m) in messages.enumerated() {
                leafHash(m, scratch: &scratch, into: UnsafeMutableRawBufferPointer(rebasing: out[i * BatchTree.hashLength..<(i + 1) * BatchTree.hashLength]))
            }
        }
        let tree = BatchTree(leaves: leaves)
        let signature = identity.sign(signedBytes(origin: origin, root: tree.root))
        return messages.indices.map { i in
            SignedMessage(message: messages[i], proof: BatchProof(signature: signature, index: UInt16(i), tree: tree))
        }
    }

    /// Whether `signed` (typically relayed alone) was made by the holder of `originNodeKey`. Verified
    /// roots are remembered in `cache`, so the rest of a batch costs one hash path each.
    public static func verify(_ signed: SignedMessage, originNodeKey: [UInt8], cache: inout VerifiedRoots) -> Bool {
        guard let root = BatchTree.root(leaf: leafHash(signed.message), index: Int(signed.proof.index), count: Int(signed.proof.count), path: signed.proof.path) else {
            return false
        }
        return verify(origin: signed.message.origin, root: root, signature: signed.proof.signature, originNodeKey: originNodeKey, cache: &cache)
    }

    /// Whether a whole batch, as received from a link, was signed by the holder of `originNodeKey`.
    public static func verify(_ batch: SignedBatch, originNodeKey: [UInt8], cache: inout VerifiedRoots) -> Bool {
        verify(origin: batch.origin, root: batch.tree.root, signature: batch.signature, originNodeKey: originNodeKey, cache: &cache)
    }

    private static func verify(origin: MemberID, root: [UInt8], signature: [UInt8], originNodeKey: [UInt8], cache: inout VerifiedRoots) -> Bool {
        let signed = signedBytes(origin: origin, root: root)
        let key = signed + signature
        if cache.contains(key) { return true }
        guard Identity.verify(signature: signature, message: signed, publicKey: originNodeKey) else { return false }
        cache.insert(key)
        return true
    }
}

/// A batch's signature checked outside the core (`MessageBatch.check`, on a link's reader), against
/// the key the checker held for its origin. Made only by a check that passed (its initializer is
/// internal), so the core may remember it as verified (`SessionCore.signaturesChecked`) — and does
/// only when that key is the one it holds for the origin.
public struct CheckedSignature: Sendable {
    let origin: MemberID
    let originNodeKey: [UInt8]
    /// What `VerifiedRoots` remembers: the signed bytes and the signature.
    let verified: [UInt8]

    /// Whether `signed` carries the signature this check passed (another message of its batch):
    /// it need not be checked again (if its proof leads to another root, the core finds it unchecked).
    public func signs(_ signed: SignedMessage) -> Bool {
        let signature = signed.proof.signature
        return origin == signed.message.origin && verified.count >= signature.count && verified.suffix(signature.count).elementsEqual(signature)
    }
}

extension MessageBatch {
    /// Checks `batch`'s signature against `originNodeKey` (its Ed25519 check, off the core); nil when
    /// it does not verify.
    public static func check(_ batch: SignedBatch, originNodeKey: [UInt8]) -> CheckedSignature? {
        check(origin: batch.origin, root: batch.tree.root, signature: batch.signature, originNodeKey: originNodeKey)
    }

    /// Checks the signature of `signed` (one message passed on alone, with its proof) against
    /// `originNodeKey`, off the core; nil when its proof or signature does not verify.
    public static func check(_ signed: SignedMessage, originNodeKey: [UInt8]) -> CheckedSignature? {
        guard let root = BatchTree.root(leaf: leafHash(signed.message), index: Int(signed.proof.index), count: Int(signed.proof.count), path: signed.proof.path) else {
            return nil
        }
        return check(origin: signed.message.origin, root: root, signature: signed.proof.signature, originNodeKey: originNodeKey)
    }

    private static func check(origin: MemberID, root: [UInt8], signature: [UInt8], originNodeKey: [UInt8]) -> CheckedSignature? {
        let signed = signedBytes(origin: origin, root: root)
        guard Identity.verify(signature: signature, message: signed, publicKey: originNodeKey) else { return nil }
        return CheckedSignature(origin: origin, originNodeKey: originNodeKey, verified: signed + signature)
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
