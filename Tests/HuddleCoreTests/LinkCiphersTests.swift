import HuddleCore
import HuddleCrypto
import Testing

/// Issue 20 item 5: link ciphers rekey by volume and by time (Noise REKEY), both ends in step
/// without a round trip: the sender flags the last record under a key inside its ciphertext.
struct LinkCiphersTests {
    /// The two transport ciphers of one direction of a fresh link: (initiator's send, responder's receive).
    private func cipherPair() throws -> (send: NoiseCipherState, receive: NoiseCipherState) {
        let key = SessionKey.generate()
        var a = try LinkHandshake(role: .initiator, sessionKey: key, identity: .generate(), appPayload: [])
        var b = try LinkHandshake(role: .responder, sessionKey: key, identity: .generate(), appPayload: [])
        let m2 = try #require(try b.receive(try a.start()))
        let m3 = try #require(try a.receive(m2))
        _ = try b.receive(m3)
        return (try #require(a.result).send, try #require(b.result).receive)
    }

    private func record(_ size: Int, _ seed: Int) -> [UInt8] {
        [0] + (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed) }
    }

    @Test func bothEndsMoveOnTogetherByVolume() throws {
        let (send, receive) = try cipherPair()
        var sealer = LinkSealer(send, now: 0, rekeyBytes: 1000, rekeyInterval: 3600)
        var opener = LinkOpener(receive)
        var reassembler = LinkReassembler(limit: 1 << 20)
        for i in 0..<200 {
            let plain = record(i * 7 % 300, i)
            let opened = try opener.open(try sealer.seal(plain, now: 1))
            #expect(opened == plain, "record \(i) came out changed")
            #expect(try reassembler.add(opened) == Array(plain.dropFirst()), "the reassembler never sees the rekey flag")
        }
        #expect(sealer.rekeys > 20, "about 29 KiB of records at 1000 bytes per key: \(sealer.rekeys)")
        #expect(opener.rekeys == sealer.rekeys)
    }

    @Test func bothEndsMoveOnTogetherByTime() throws {
        let (send, receive) = try cipherPair()
        var sealer = LinkSealer(send, now: 100, rekeyBytes: 1 << 30, rekeyInterval: 60)
        var opener = LinkOpener(receive)
        for (i, now) in [100.0, 130, 159.9, 160, 161, 219, 220.5, 221].enumerated() {
            let plain = record(10, i)
            #expect(try opener.open(try sealer.seal(plain, now: now)) == plain)
        }
        #expect(sealer.rekeys == 2 && opener.rekeys == 2, "at 160 and at 220.5: \(sealer.rekeys), \(opener.rekeys)")
    }

    /// A receive key taken from memory (or a receiver that ignored the flag) opens nothing the
    /// sender sealed after the rekey.
    @Test func theOldKeyOpensNothingAfterTheRekey() throws {
        let (send, receive) = try cipherPair()
        var sealer = LinkSealer(send, now: 0, rekeyBytes: 1 << 30, rekeyInterval: 10)
        var stale = receive
        let before = try sealer.seal(record(5, 1), now: 1)
        let flagged = try sealer.seal(record(5, 2), now: 11)
        let after = try sealer.seal(record(5, 3), now: 12)
        #expect(try stale.decrypt(ad: [], ciphertext: before) == record(5, 1))
        #expect(try stale.decrypt(ad: [], ciphertext: flagged).first == LinkRecords.rekeyFlag, "the flag travels inside the ciphertext")
        #expect(throws: CryptoError.self) { try stale.decrypt(ad: [], ciphertext: after) }
    }

    /// A peer that flags every record makes the receiver rekey every record, and nothing breaks.
    @Test func aFlagOnEveryRecordKeepsTheEndsInStep() throws {
        let (send, receive) = try cipherPair()
        var sealer = LinkSealer(send, now: 0, rekeyBytes: 1, rekeyInterval: 3600)
        var opener = LinkOpener(receive)
        for i in 0..<50 { #expect(try opener.open(try sealer.seal(record(3, i), now: 0)) == record(3, i)) }
        #expect(sealer.rekeys == 50 && opener.rekeys == 50)
    }
}
