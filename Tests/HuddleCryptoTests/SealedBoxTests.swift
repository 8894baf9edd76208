import CSodium
import Testing
@testable import HuddleCrypto

/// Issue 21: an epoch key sealed to a member's node key opens with that member's identity only.
@Suite struct SealedBoxTests {
    let alice = Identity(seed: [UInt8](repeating: 1, count: 32))
    let bob = Identity(seed: [UInt8](repeating: 2, count: 32))
    let secret = [UInt8](0..<40)

    @Test func aBoxOpensWithTheIdentityItWasSealedTo() throws {
        let box = try SealedBox.seal(secret, to: alice.publicKey)
        #expect(box.count == secret.count + SealedBox.overhead)
        #expect(try SealedBox.open(box, with: alice) == secret)
    }

    @Test func aSeededBoxIsDeterministicAndOpensWithLibsodiumsSealOpen() throws {
        let seed = [UInt8](repeating: 7, count: 32)
        let box = try SealedBox.seal(secret, to: alice.publicKey, ephemeralSeed: seed)
        #expect(try SealedBox.seal(secret, to: alice.publicKey, ephemeralSeed: seed) == box, "the same seed makes the same box")
        #expect(try SealedBox.seal(secret, to: alice.publicKey, ephemeralSeed: [UInt8](repeating: 8, count: 32)) != box)
        // crypto_box_seal_open itself, with the X25519 keys converted by hand: the box is a real sealed box.
        var pk = [UInt8](repeating: 0, count: 32), sk = [UInt8](repeating: 0, count: 32)
        #expect(crypto_sign_ed25519_pk_to_curve25519(&pk, alice.publicKey) == 0)
        sk = alice.x25519SecretKey()
        var out = [UInt8](repeating: 0, count: secret.count)
        #expect(crypto_box_seal_open(&out, box, UInt64(box.count), pk, sk) == 0)
        #expect(out == secret)
    }

    @Test func anotherIdentityFailsCleanly() throws {
        let box = try SealedBox.seal(secret, to: alice.publicKey, ephemeralSeed: [UInt8](repeating: 3, count: 32))
        #expect(throws: CryptoError.doesNotOpen) { try SealedBox.open(box, with: bob) }
    }

    @Test func aChangedBoxDoesNotOpen() throws {
        let box = try SealedBox.seal(secret, to: alice.publicKey)
        for i in [0, 31, 32, box.count - 1] {
            var damaged = box
            damaged[i] ^= 0x40
            #expect(throws: CryptoError.doesNotOpen) { try SealedBox.open(damaged, with: alice) }
        }
        #expect(throws: CryptoError.tooShort(47)) { try SealedBox.open(Array(box.prefix(47)), with: alice) }
        #expect(throws: CryptoError.tooShort(0)) { try SealedBox.open([], with: alice) }
    }

    @Test func badNodeKeysAndSeedsAreTypedErrors() {
        // Wrong length, the identity point (small order), and a y coordinate off the curve.
        var offCurve = [UInt8](repeating: 0, count: 32)
        offCurve[0] = 2
        var identityPoint = [UInt8](repeating: 0, count: 32)
        identityPoint[0] = 1
        for key in [[UInt8](repeating: 9, count: 31), [], identityPoint, [UInt8](repeating: 0, count: 32), offCurve] {
            #expect(throws: CryptoError.badNodeKey) { try SealedBox.seal(secret, to: key) }
            #expect(throws: CryptoError.badNodeKey) { try SealedBox.seal(secret, to: key, ephemeralSeed: [UInt8](repeating: 1, count: 32)) }
            #expect(!SealedBox.canSeal(to: key))
        }
        #expect(SealedBox.canSeal(to: alice.publicKey))
        #expect(throws: CryptoError.badSeed) { try SealedBox.seal(secret, to: alice.publicKey, ephemeralSeed: [1]) }
    }
}
