import HuddleCrypto

/// The Merkle tree over one signed batch of an origin's messages: 32-byte hashes level by level
/// from the leaves to the root (a lone last node moves up unchanged). Leaves and inner nodes are
/// keyed BLAKE2b under different keys, so a leaf can never pass for a node.
///
/// Immutable once built, so every message of a batch shares one tree and takes its proof path from
/// it only when the message is relayed.
public final class BatchTree: Sendable {
    static let hashLength = 32
    private static let leafKey = Array("huddle msg leaf1".utf8)
    private static let nodeKey = Array("huddle msg node1".utf8)

    /// `levels[0]` holds the leaves, the last level the root; each level is its hashes end to end.
    private let levels: [[UInt8]]

    /// Builds the tree over `leaves` (count × 32 bytes, count ≥ 1).
    init(leaves: [UInt8]) {
        precondition(!leaves.isEmpty && leaves.count % Self.hashLength == 0, "BatchTree needs whole 32-byte leaves")
        var levels = [leaves]
        while let top = levels.last, top.count > Self.hashLength {
            let width = top.count / Self.hashLength
            var next = [UInt8](repeating: 0, count: (width + 1) / 2 * Self.hashLength)
            top.withUnsafeBytes { below in
                next.withUnsafeMutableBytes { above in
                    for i in stride(from: 0, to: width, by: 2) {
                        let out = UnsafeMutableRawBufferPointer(rebasing: above[i / 2 * Self.hashLength..<(i / 2 + 1) * Self.hashLength])
                        if i + 1 < width {
                            Self.parent(UnsafeRawBufferPointer(rebasing: below[i * Self.hashLength..<(i + 2) * Self.hashLength]), into: out)
                        } else {
                            out.copyMemory(from: UnsafeRawBufferPointer(rebasing: below[i * Self.hashLength..<(i + 1) * Self.hashLength]))
                        }
                    }
                }
            }
            levels.append(next)
        }
        self.levels = levels
    }

    var count: Int { levels[0].count / Self.hashLength }
    var root: [UInt8] { levels[levels.count - 1] }

    func leaf(_ index: Int) -> ArraySlice<UInt8> { levels[0][index * Self.hashLength..<(index + 1) * Self.hashLength] }

    /// The sibling hashes from leaf `index` up to the root.
    func path(_ index: Int) -> [[UInt8]] {
        var path: [[UInt8]] = []
        var position = index
        for level in levels.dropLast() {
            let sibling = position ^ 1
            if sibling < level.count / Self.hashLength {
                path.append(Array(level[sibling * Self.hashLength..<(sibling + 1) * Self.hashLength]))
            }
            position /= 2
        }
        return path
    }

    /// The leaf hash of an encoded message, written to `out` (32 bytes).
    static func leafHash(ofEncoded message: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        leafKey.withUnsafeBytes { BLAKE2b.hash(message, key: $0, into: out) }
    }

    /// The hash of two adjacent nodes (`pair` is left ‖ right, 64 bytes), written to `out`.
    static func parent(_ pair: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        nodeKey.withUnsafeBytes { BLAKE2b.hash(pair, key: $0, into: out) }
    }

    /// The root that `path` leads to from the leaf `leaf` at `index` of `count`, or nil when the
    /// path does not fit the index and count.
    static func root(leaf: [UInt8], index: Int, count: Int, path: [[UInt8]]) -> [UInt8]? {
        var hash = leaf
        var pair = [UInt8](repeating: 0, count: 2 * hashLength)
        var position = index, width = count
        var rest = path[...]
        while width > 1 {
            let sibling = position ^ 1
            if sibling < width {
                guard let next = rest.popFirst(), next.count == hashLength else { return nil }
                let (left, right) = position % 2 == 0 ? (hash, next) : (next, hash)
                pair.replaceSubrange(0..<hashLength, with: left)
                pair.replaceSubrange(hashLength..<2 * hashLength, with: right)
                pair.withUnsafeBytes { p in hash.withUnsafeMutableBytes { parent(p, into: $0) } }
            }
            position /= 2
            width = (width + 1) / 2
        }
        return rest.isEmpty ? hash : nil
    }
}
