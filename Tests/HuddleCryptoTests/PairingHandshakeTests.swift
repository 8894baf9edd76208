import Testing
@testable import HuddleCrypto

/// The pairing protocol's frames, run between a joiner and a member in memory.
private let password = Array("7-abandon-ability-zoo-zoo".utf8)

private func exchange(joinerPassword: [UInt8], memberPassword: [UInt8]) throws -> (PairingHandshake.Joiner, PairingHandshake.Member, [UInt8]) {
    let joiner = try PairingHandshake.Joiner(nameplate: 7, password: joinerPassword)
    let hello = try PairingHandshake.parseHello(joiner.hello)
    #expect(hello.nameplate == 7)
    let member = try PairingHandshake.Member(hello: hello, password: memberPassword)
    return (joiner, member, member.answer)
}

@Test func theRightCodeHandsOverTheKeyAndItsEpoch() throws {
    var (joiner, member, answer) = try exchange(joinerPassword: password, memberPassword: password)
    #expect(PairingHandshake.isHello(joiner.hello))
    let confirm = try joiner.receiveAnswer(answer)
    #expect(member.confirms(confirm))
    let genesis = SessionKey.generate()
    let key = try SessionKey(bytes: SessionKey.generate().bytes, epoch: 3, sessionID: genesis.sessionID, head: [UInt8](repeating: 7, count: 32))
    #expect(try joiner.receiveKey(member.sealKey(key)) == key, "the epoch, session id and head come with the key")
    #expect(try joiner.receiveKey(member.sealKey(genesis)) == genesis)
}

@Test func aWrongCodeIsDetectedOnBothSidesBeforeTheKeyIsSent() throws {
    var (joiner, member, answer) = try exchange(joinerPassword: Array("7-abandon-ability-zoo-zone".utf8), memberPassword: password)
    #expect(throws: CryptoError.wrongCode) { _ = try joiner.receiveAnswer(answer) }
    // A joiner that sends a confirmation anyway (it cannot compute the right one) is refused.
    #expect(!member.confirms([UInt8](repeating: 0, count: 32)))
    #expect(!member.confirms(answer.suffix(32).map { $0 }), "the member's own confirmation is not the joiner's")
    #expect(throws: CryptoError.malformed("a key before the answer")) { _ = try joiner.receiveKey([UInt8](repeating: 0, count: 80)) }
}

@Test func neitherTheCodeNorTheKeyCrossesInTheFrames() throws {
    var (joiner, member, answer) = try exchange(joinerPassword: password, memberPassword: password)
    let key = SessionKey.generate()
    let frames = [joiner.hello, answer, try joiner.receiveAnswer(answer), member.sealKey(key)]
    for frame in frames {
        #expect(!frame.contains(subsequence: password) && !frame.contains(subsequence: key.bytes))
        #expect(!frame.contains(subsequence: Array("abandon".utf8)))
    }
}

@Test func refusalsAndMalformedFramesAreTypedErrors() throws {
    var joiner = try PairingHandshake.Joiner(nameplate: 7, password: password)
    #expect(throws: CryptoError.refused("the invitation expired")) { _ = try joiner.receiveAnswer(PairingHandshake.refusal("the invitation expired")) }
    #expect(throws: (any Error).self) { _ = try joiner.receiveAnswer([1, 2, 3]) }
    #expect(throws: CryptoError.wrongCode) { _ = try joiner.receiveAnswer([UInt8](repeating: 0xff, count: 64)) }
    #expect(throws: (any Error).self) { _ = try PairingHandshake.parseHello(PairingHandshake.magic + [0, 0, 0, 7]) }
    var bad = try PairingHandshake.parseHello(joiner.hello)
    bad = PairingHandshake.Hello(nameplate: bad.nameplate, sessionID: bad.sessionID, message: [UInt8](repeating: 0xff, count: 32))
    #expect(throws: (any Error).self) { _ = try PairingHandshake.Member(hello: bad, password: password) }
    #expect(!PairingHandshake.isHello([0, 32, 1, 2]), "a link handshake's first frame is not a pairing")
}

extension Array where Element == UInt8 {
    fileprivate func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, count >= needle.count else { return false }
        return (0...(count - needle.count)).contains { self[$0..<$0 + needle.count].elementsEqual(needle) }
    }
}
