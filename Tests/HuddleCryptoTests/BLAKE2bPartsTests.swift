import Testing
@testable import HuddleCrypto

/// Hashing a chunk body in the frames it arrived in gives the hash of the whole body.
@Test func blake2bOfPartsEqualsTheHashOfTheJoinedBytes() {
    let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    let cuts = [0, 1, 65_535, 65_536, 200_000, 300_000]
    let parts = zip(cuts, cuts.dropFirst()).map { Array(bytes[$0..<$1]) }
    let streamed = BLAKE2b.hash(length: 32) { update in
        for part in parts { part.withUnsafeBytes(update) }
    }
    #expect(streamed == BLAKE2b.hash(bytes, length: 32))
    #expect(BLAKE2b.hash(length: 32) { _ in } == BLAKE2b.hash([], length: 32))
}
