import Testing
@testable import HuddleCrypto

/// Issue 20, item 3: a link's datagram keys, from its handshake.
private func link(_ key: SessionKey, _ alice: Identity, _ bob: Identity) throws -> (LinkHandshakeResult, LinkHandshakeResult) {
    var a = try LinkHandshake(role: .initiator, sessionKey: key, identity: alice, appPayload: [])
    var b = try LinkHandshake(role: .responder, sessionKey: key, identity: bob, appPayload: [])
    guard let m2 = try b.receive(try a.start()), let m3 = try a.receive(m2) else { throw CryptoError("handshake stalled") }
    _ = try b.receive(m3)
    guard let ra = a.result, let rb = b.result else { throw CryptoError("handshake did not complete") }
    return (ra, rb)
}

@Test func bothEndsOfALinkDeriveTheSameDatagramKeysOneKeyPerDirection() throws {
    let key = SessionKey.generate()
    let (a, b) = try link(key, .generate(), .generate())
    #expect(a.datagramKeys.send == b.datagramKeys.receive && a.datagramKeys.receive == b.datagramKeys.send)
    #expect(a.datagramKeys.sendID == b.datagramKeys.receiveID && a.datagramKeys.receiveID == b.datagramKeys.sendID)
    #expect(a.datagramKeys.send != a.datagramKeys.receive, "the two directions have different keys")
    #expect(a.datagramKeys.send.count == AEAD.keyLength)
    // Not the session's datagram subkey, not the handshake hash: keys of this link alone.
    #expect(a.datagramKeys.send != key.subkey(.datagram) && Array(a.handshakeHash.prefix(32)) != a.datagramKeys.send)
    // What one end seals, the other opens; a key of the other direction does not.
    let nonce = AEAD.randomNonce()
    let sealed = AEAD.seal([1, 2, 3], ad: [], nonce: nonce, key: a.datagramKeys.send)
    #expect(try AEAD.open(sealed, ad: [], nonce: nonce, key: b.datagramKeys.receive) == [1, 2, 3])
    #expect(throws: (any Error).self) { try AEAD.open(sealed, ad: [], nonce: nonce, key: b.datagramKeys.send) }
}

@Test func everyLinkGetsUnrelatedDatagramKeysEvenBetweenTheSameTwoMembers() throws {
    let key = SessionKey.generate()
    let alice = Identity.generate(), bob = Identity.generate(), carol = Identity.generate()
    let (first, _) = try link(key, alice, bob)
    let (second, _) = try link(key, alice, bob)
    let (other, _) = try link(key, alice, carol)
    let all = [first, second, other].flatMap { [$0.datagramKeys.send, $0.datagramKeys.receive] }
    #expect(Set(all).count == all.count)
}

@Test func seededDatagramKeysAreOrientedAndReversible() {
    let keys = PairDatagramKeys(seed: [1, 2, 3])
    #expect(keys.reversed.send == keys.receive && keys.reversed.receiveID == keys.sendID)
    #expect(PairDatagramKeys(seed: [1, 2, 3]).send == keys.send && PairDatagramKeys(seed: [1, 2, 4]).send != keys.send)
}
