import Testing
@testable import HuddleCrypto

/// CPace against the published test vectors of draft-irtf-cfrg-cpace-21, appendix "Test vector for
/// CPace using group ristretto255 and hash SHA-512" (also `testvectors.json`, `G_Coffee25519`, in
/// the draft's repository github.com/cfrg/draft-irtf-cfrg-cpace), byte for byte.
private func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.filter { !$0.isWhitespace }.utf8)
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

private let prs = Array("Password".utf8)
private let ci = hex("0b415f696e69746961746f720b425f726573706f6e646572")
private let sid = hex("7e4b4791d6a8ef019b936c79fb7f2c57")
private let ya = hex("da3d23700a9e5699258aef94dc060dfda5ebb61f02a5ea77fad53f4ff0976d08")
private let yb = hex("d2316b454718c35362d83d69df6320f38578ed5984651435e2949762d900b80d")
private let ada = Array("ADa".utf8), adb = Array("ADb".utf8)
private let expectedYa = hex("d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0eec482b9157")
private let expectedYb = hex("3ea7e0b19560d7c0b0f5734f63b955286dfa8232b5ebe63324e2d9e7433f7258")
private let expectedISK = hex("""
    b69effbf61b51d56401c0f65601abe428de8206feaaf0e32198896dcae7b35cd2b38950a39dfd5d4a79164614c2984f7daa460b588c1e80c3fa2068af7900447
    """)

@Test func stringUtilitiesMatchTheDraft() {
    #expect(CPace.prependLength([]) == [0])
    #expect(CPace.prependLength(Array("1234".utf8)) == hex("0431323334"))
    #expect(CPace.prependLength((0..<127).map(UInt8.init)).prefix(2) == [0x7f, 0x00])
    #expect(CPace.prependLength((0..<128).map(UInt8.init)).prefix(3) == [0x80, 0x01, 0x00])
    #expect(CPace.lvCat(Array("1234".utf8), Array("5".utf8), [], Array("678".utf8)) == hex("043132333401350003363738"))
}

@Test func theGeneratorMatchesTheDraft() {
    let string = CPace.generatorString(password: prs, channelIdentifier: ci, sessionID: sid)
    #expect(string.count == 170)
    #expect(string == hex("""
        11435061636552697374726574746f3235350850617373776f726464
        00000000000000000000000000000000000000000000000000000000
        00000000000000000000000000000000000000000000000000000000
        00000000000000000000000000000000000000000000000000000000
        00000000000000000000000000000000180b415f696e69746961746f
        720b425f726573706f6e646572107e4b4791d6a8ef019b936c79fb7f
        2c57
        """))
    #expect(CPace.sha512(string) == hex("""
        da6d3ddc8802fca9058755ffd3ebde08a9c2c74945901a258482a288b6663af06bf645c93cd1c51512307199c80e84908916d983b34af77205f90851a657ee27
        """))
    #expect(CPace.generator(password: prs, channelIdentifier: ci, sessionID: sid) == hex("222b6b195fe84b1652badb6f6a3ae3d24341e7306967f0b8115b40d5698c7e56"))
}

@Test func messagesSharedPointAndISKMatchTheDraft() throws {
    let a = try CPace.Initiator(password: prs, channelIdentifier: ci, sessionID: sid, associatedData: ada, scalar: ya)
    #expect(a.message == expectedYa)
    let b = try CPace.Responder(password: prs, channelIdentifier: ci, sessionID: sid, peerMessage: a.message, peerAssociatedData: ada,
                                associatedData: adb, scalar: yb)
    #expect(b.message == expectedYb)
    #expect(try CPace.scalarMult(ya, expectedYb) == hex("80b69a8a76457ab6a4d7f887a4bf6b55a2f80ac19c333f917a05fc9887c8b40f"))
    #expect(try CPace.scalarMult(yb, expectedYa) == hex("80b69a8a76457ab6a4d7f887a4bf6b55a2f80ac19c333f917a05fc9887c8b40f"))
    #expect(b.isk == expectedISK)
    #expect(try a.finish(peerMessage: b.message, peerAssociatedData: adb) == expectedISK)
}

@Test func theDraftsValidAndInvalidPointsAreHandled() throws {
    // G_Coffee25519_points in the draft's testvectors.json.
    let s = hex("7cd0e075fa7955ba52c02759a6c90dbbfc10e6d40aea8d283e407d88cf538a05")
    let x = hex("2c3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c")
    #expect(try CPace.scalarMult(s, x) == hex("7c13645fe790a468f62c39beb7388e541d8405d1ade69d1778c5fe3e7f6b600e"))
    #expect(throws: CryptoError.invalidPoint) { try CPace.scalarMult(s, hex("2b3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c")) }
    // The identity's encoding decodes, but the product is the identity: abort.
    #expect(throws: CryptoError.identityElement) { try CPace.scalarMult(s, [UInt8](repeating: 0, count: 32)) }
    let a = try CPace.Initiator(password: prs, channelIdentifier: ci, sessionID: sid)
    for garbage in [[], [UInt8](repeating: 0xff, count: 32), [UInt8](repeating: 1, count: 31), [UInt8](repeating: 0, count: 33)] as [[UInt8]] {
        #expect(throws: (any Error).self) { _ = try a.finish(peerMessage: garbage) }
        #expect(throws: (any Error).self) { _ = try CPace.Responder(password: prs, channelIdentifier: ci, sessionID: sid, peerMessage: garbage) }
    }
}

@Test func partiesAgreeOnlyWhenPasswordChannelAndSessionMatch() throws {
    func run(_ pa: String, _ pb: String, ciB: [UInt8] = ci, sidB: [UInt8] = sid) throws -> Bool {
        let a = try CPace.Initiator(password: Array(pa.utf8), channelIdentifier: ci, sessionID: sid)
        let b = try CPace.Responder(password: Array(pb.utf8), channelIdentifier: ciB, sessionID: sidB, peerMessage: a.message)
        return try a.finish(peerMessage: b.message) == b.isk
    }
    #expect(try run("7-crossover-clockwork-ribbon", "7-crossover-clockwork-ribbon"))
    #expect(try !run("7-crossover-clockwork-ribbon", "7-crossover-clockwork-ribbons"))
    #expect(try !run("x", "x", ciB: ci + [0]))
    #expect(try !run("x", "x", sidB: [UInt8](repeating: 1, count: 16)))
    // Fresh scalars: two runs with the same password send different messages.
    let one = try CPace.Initiator(password: prs, channelIdentifier: ci, sessionID: sid)
    let two = try CPace.Initiator(password: prs, channelIdentifier: ci, sessionID: sid)
    #expect(one.message != two.message)
}
