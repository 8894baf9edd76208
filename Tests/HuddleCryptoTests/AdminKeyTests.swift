import Foundation
import Testing
@testable import HuddleCrypto

/// Issue 33: a session's admins travel with its key (key file v3, pairing) and the key is bound to
/// them — an edited admin list names another session, or derives other subkeys (no link).
@Suite(.timeLimit(.minutes(1)))
final class AdminKeyTests {
    let dir: String
    let alice = Identity(seed: [UInt8](repeating: 1, count: 32)).publicKey
    let bob = Identity(seed: [UInt8](repeating: 2, count: 32)).publicKey

    deinit { try? FileManager.default.removeItem(atPath: dir) }

    init() throws {
        var template = Array("/tmp/hd-adminkey-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CryptoError("mkdtemp failed") }
        dir = String(cString: made)
    }

    private func text(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    @Test func theKeyIsBoundToItsAdminSet() throws {
        let bytes = [UInt8](repeating: 9, count: 32)
        let none = try SessionKey(bytes: bytes), empty = try SessionKey(bytes: bytes, admins: [])
        #expect(none == empty && none.admins.isEmpty, "no admins: the session of before")
        let withAlice = try SessionKey(bytes: bytes, admins: [alice]), withBob = try SessionKey(bytes: bytes, admins: [bob])
        #expect(try SessionKey(bytes: bytes, admins: [bob, alice, alice]).admins == [alice, bob].sorted { $0.lexicographicallyPrecedes($1) })
        for (a, b) in [(none, withAlice), (none, withBob), (withAlice, withBob)] {
            #expect(a.sessionID != b.sessionID, "another admin set names another session")
            for purpose in [SessionSubkey.handshakePSK, .datagram, .chunkHeader] { #expect(a.subkey(purpose) != b.subkey(purpose)) }
        }
        // Epoch 0 with an edited admin list under the real session id and head: refused.
        #expect(throws: CryptoError.self) {
            try SessionKey(bytes: bytes, epoch: 0, sessionID: withAlice.sessionID, head: withAlice.head, admins: [bob])
        }
        // A later epoch with another admin set: accepted as held, but it derives other subkeys.
        let later = try SessionKey(bytes: bytes, epoch: 4, sessionID: withAlice.sessionID, head: [UInt8](repeating: 3, count: 32), admins: [alice])
        let edited = try SessionKey(bytes: bytes, epoch: 4, sessionID: withAlice.sessionID, head: later.head, admins: [alice, bob])
        #expect(later.subkey(.handshakePSK) != edited.subkey(.handshakePSK))
        #expect(throws: CryptoError.self) { try SessionKey.generate(admins: (0...SessionKey.maxAdmins).map { [UInt8](repeating: UInt8($0), count: 32) }) }
        #expect(throws: CryptoError.self) { try SessionKey.generate(admins: [[1, 2, 3]]) }
    }

    @Test func aKeyFileCarriesItsAdminsAndAnEditedListDoesNotLoad() throws {
        let key = try SessionKey.generate(admins: [alice, bob])
        let path = "\(dir)/admins.key"
        try key.write(to: path)
        #expect(text(path).hasPrefix("huddle-session-key v3 0 \(key.fingerprint) "))
        #expect(try SessionKey.load(from: path) == key)
        // Bob taken out of the list by hand (the session id left as it was): refused.
        let edited = "\(dir)/edited.key"
        try KeyFile.create(line: text(path).replacingOccurrences(of: ",\(hexString(key.admins[1]))", with: ""), at: edited)
        #expect(throws: CryptoError.self) { try SessionKey.load(from: edited) }
        // A later epoch keeps the admin set through a rewrite.
        let moved = try SessionKey(bytes: SessionKey.generate().bytes, epoch: 2, sessionID: key.sessionID, head: [UInt8](repeating: 4, count: 32), admins: [bob])
        try moved.rewrite(at: path)
        #expect(try SessionKey.load(from: path) == moved)
        // Files without admins still read as before, with none.
        let plain = SessionKey.generate()
        try plain.write(to: "\(dir)/plain.key")
        #expect(text("\(dir)/plain.key").hasPrefix("huddle-session-key v1 "))
        #expect(try SessionKey.load(from: "\(dir)/plain.key").admins.isEmpty)
        try KeyFile.create(line: "huddle-session-key v3 0 \(key.fingerprint) \(hexString(key.head)) zz \(Data(key.bytes).base64EncodedString())\n", at: "\(dir)/bad.key")
        #expect(throws: CryptoError.self) { try SessionKey.load(from: "\(dir)/bad.key") }
    }

    @Test func pairingHandsTheAdminSetWithTheKey() throws {
        let password = Array("7-abandon-ability-zoo-zoo".utf8)
        var joiner = try PairingHandshake.Joiner(nameplate: 7, password: password)
        let member = try PairingHandshake.Member(hello: try PairingHandshake.parseHello(joiner.hello), password: password)
        #expect(member.confirms(try joiner.receiveAnswer(member.answer)))
        let genesis = try SessionKey.generate(admins: [alice])
        #expect(try joiner.receiveKey(member.sealKey(genesis)) == genesis)
        let later = try SessionKey(bytes: SessionKey.generate().bytes, epoch: 5, sessionID: genesis.sessionID, head: [UInt8](repeating: 8, count: 32), admins: [alice, bob])
        let received = try joiner.receiveKey(member.sealKey(later))
        #expect(received == later && received.admins.count == 2)
        #expect(try joiner.receiveKey(member.sealKey(SessionKey.generate())).admins.isEmpty)
    }
}
