/// One flush of an origin's messages as it crosses one link: the origin's signature over the
/// batch's Merkle root and, at every position, either the message (when the receiver is among its
/// recipients) or only its leaf hash. The receiver rebuilds the tree from what it got, so a message
/// costs one leaf hash to check and carries no proof path on the wire; proofs are derived from the
/// tree only when a member relays a message alone.
///
/// Guarantees: every carried message names `origin` as its sender; `messages` are in batch order.
public struct SignedBatch: Sendable, Equatable {
    public let origin: MemberID
    public let signature: [UInt8]
    let tree: BatchTree
    /// The carried messages, with proofs that point into `tree`.
    public let messages: [SignedMessage]

    /// The part of a signed flush (`MessageBatch.sign`'s result) that `recipient` should get:
    /// broadcasts and the directed messages it is a target of. Nil when nothing is for it.
    public init?(of flush: [SignedMessage], for recipient: MemberID) {
        guard let first = flush.first, let tree = first.proof.tree else { return nil }
        let carried = flush.filter { $0.message.to?.contains(recipient) ?? true }
        guard !carried.isEmpty else { return nil }
        origin = first.message.origin
        signature = first.proof.signature
        self.tree = tree
        messages = carried
    }

    private init(origin: MemberID, signature: [UInt8], tree: BatchTree, messages: [SignedMessage]) {
        self.origin = origin; self.signature = signature; self.tree = tree; self.messages = messages
    }

    public static func == (a: SignedBatch, b: SignedBatch) -> Bool {
        a.origin == b.origin && a.signature == b.signature && a.tree.root == b.tree.root && a.messages == b.messages
    }

    func encode(into w: inout WireWriter) {
        w.member(origin); w.raw(signature); w.u16(UInt16(tree.count))
        var next = messages.startIndex
        for position in 0..<tree.count {
            if next < messages.endIndex, Int(messages[next].proof.index) == position {
                w.u8(1)
                messages[next].message.encode(into: &w)
                next += 1
            } else {
                w.u8(0)
                w.raw(tree.leaf(position))
            }
        }
    }

    static func decode(from r: inout WireReader) throws(CoreError) -> SignedBatch {
        let origin = try r.member("batch origin")
        let signature = try r.raw(64, "batch signature")
        let count = try r.count16(minItemSize: 33, "batch")
        guard count >= 1, count <= BatchProof.maximumBatch else { throw CoreError("batch of \(count) messages (must be 1...\(BatchProof.maximumBatch))") }
        var leaves = [UInt8](repeating: 0, count: count * BatchTree.hashLength)
        var carried: [(Int, WireMessage)] = []
        carried.reserveCapacity(count)
        for position in 0..<count {
            let slot = position * BatchTree.hashLength..<(position + 1) * BatchTree.hashLength
            switch try r.u8("batch entry flag") {
            case 0:
                leaves.replaceSubrange(slot, with: try r.raw(BatchTree.hashLength, "leaf hash"))
            case 1:
                let start = r.offset
                let message = try WireMessage.decode(from: &r)
                guard message.origin == origin else { throw CoreError("batch of \(origin) carries a message from \(message.origin)") }
                r.withBytes(from: start) { encoded in
                    leaves.withUnsafeMutableBytes { BatchTree.leafHash(ofEncoded: encoded, into: UnsafeMutableRawBufferPointer(rebasing: $0[slot])) }
                }
                carried.append((position, message))
            default:
                throw CoreError("bad batch entry flag")
            }
        }
        let tree = BatchTree(leaves: leaves)
        let messages = carried.map { SignedMessage(message: $0.1, proof: BatchProof(signature: signature, index: UInt16($0.0), tree: tree)) }
        return SignedBatch(origin: origin, signature: signature, tree: tree, messages: messages)
    }
}
