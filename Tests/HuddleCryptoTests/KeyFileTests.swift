import Foundation
import Testing
@testable import HuddleCrypto

private func tempPath(_ name: String) -> String {
    "\(NSTemporaryDirectory())huddle-crypto-test-\(UUID().uuidString)-\(name)"
}

private func mode(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? Int) ?? -1
}

@Test func sessionKeyWriteLoadRoundTripWithMode0600() throws {
    let path = tempPath("a.key")
    defer { unlink(path) }
    let key = SessionKey.generate()
    try key.write(to: path)
    #expect(mode(path) == 0o600)
    let loaded = try SessionKey.load(from: path)
    #expect(loaded.bytes == key.bytes)
    #expect(loaded.fingerprint == key.fingerprint && key.fingerprint.count == 16)
    #expect(throws: CryptoError.self) { try SessionKey.generate().write(to: path) }
}

@Test(arguments: [0o644, 0o640, 0o604])
func loadRefusesKeysReadableByOthers(permissions: Int) throws {
    let path = tempPath("open.key")
    defer { unlink(path) }
    try SessionKey.generate().write(to: path)
    chmod(path, mode_t(permissions))
    do {
        _ = try SessionKey.load(from: path)
        Issue.record("loaded a key with mode \(String(permissions, radix: 8))")
    } catch let error as CryptoError {
        #expect(error.message.contains("chmod 600 \(path)"))
        #expect(!error.message.contains("\n"))
    }
}

@Test(arguments: ["", "garbage", "huddle-session-key v1 !!!notbase64", "huddle-session-key v1 AAAA",
                  "huddle-session-key v2 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "wrong-header v1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
func loadRefusesMalformedKeys(contents: String) throws {
    let path = tempPath("bad.key")
    defer { unlink(path) }
    _ = FileManager.default.createFile(atPath: path, contents: Data(contents.utf8), attributes: [.posixPermissions: 0o600])
    do {
        _ = try SessionKey.load(from: path)
        Issue.record("loaded malformed key \(contents)")
    } catch let error as CryptoError {
        #expect(error.message.contains(path))
        #expect(!error.message.contains("\n"))
    }
}

@Test func missingKeyFileIsOneClearLine() {
    #expect(throws: CryptoError.self) { try SessionKey.load(from: "/nonexistent/huddle.key") }
}

@Test func identityPersistsAndSigns() throws {
    let path = tempPath("id")
    defer { unlink(path) }
    let first = try Identity.loadOrCreate(path: path)
    let second = try Identity.loadOrCreate(path: path)
    #expect(first.publicKey == second.publicKey)
    #expect(mode(path) == 0o600)
    let signature = first.sign([1, 2, 3])
    #expect(Identity.verify(signature: signature, message: [1, 2, 3], publicKey: second.publicKey))
    #expect(!Identity.verify(signature: signature, message: [1, 2, 4], publicKey: second.publicKey))
    #expect(!Identity.verify(signature: [], message: [1, 2, 3], publicKey: second.publicKey))
}

@Test func primitivesBehave() throws {
    let key = SecureRandom.bytes(32), nonce = AEAD.randomNonce()
    let sealed = AEAD.seal([1, 2, 3], ad: [9], nonce: nonce, key: key)
    #expect(try AEAD.open(sealed, ad: [9], nonce: nonce, key: key) == [1, 2, 3])
    #expect(throws: CryptoError.self) { try AEAD.open(sealed, ad: [8], nonce: nonce, key: key) }
    #expect(hexString(BLAKE2b.hash([], length: 64)).hasPrefix("786a02f742015903c6c6fd852552d272"))
    let session = SessionKey.generate()
    #expect(session.subkey(.handshakePSK) != session.subkey(.datagram))
    #expect(session.subkey(.datagram) == session.subkey(.datagram))
    #expect(bytesFromHex("0aFf") == [0x0A, 0xFF] && bytesFromHex("abc") == nil && bytesFromHex("zz") == nil)
}
