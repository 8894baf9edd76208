import Foundation
import HuddleTestSupport
import Testing
@testable import HuddleCrypto

/// Issue 21: the key file carries the epoch (v2); v1 files are epoch 0 and derive what they always
/// did; a member moving to a new epoch rewrites its key file atomically.
@Suite(.timeLimit(.minutes(1)))
final class EpochKeyFileTests {
    let dir: String

    deinit { try? FileManager.default.removeItem(atPath: dir) }

    init() throws {
        var template = Array("/tmp/hd-epochkey-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CryptoError("mkdtemp failed") }
        dir = String(cString: made)
    }

    private func file(_ name: String, _ contents: String, mode: Int = 0o600) -> String {
        let path = "\(dir)/\(name)"
        _ = FileManager.default.createFile(atPath: path, contents: Data(contents.utf8), attributes: [.posixPermissions: mode])
        return path
    }

    private func text(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    private func mode(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? Int) ?? -1
    }

    /// A v1 file made before epochs is epoch 0, and its fingerprint and subkeys are exactly what they
    /// were (known answers computed with Python's hashlib BLAKE2b, libsodium's KDF by its definition).
    @Test func aV1FileIsEpochZeroWithTodaysFingerprintAndSubkeys() throws {
        let path = file("v1.key", "huddle-session-key v1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")
        let key = try SessionKey.load(from: path)
        #expect(key.bytes == Array(0..<32) && key.epoch == 0)
        #expect(key.fingerprint == "eeda797f79781a37")
        #expect(hexString(key.head) == "828faba9a3b05c732e12acd326b85cfd7487afe0fa64131e4fcf334d5d2ec7fb")
        #expect(hexString(key.subkey(.handshakePSK)) == "f2c64a948cdd42cd7173595cb4d11923c2fb5040c4d4e31bc1d22129f88a55dc")
        #expect(hexString(key.subkey(.datagram)) == "8f686291aed2e0e1fd7c6d449e28fa2a54bd4966ed1473a6e1e88367ae6b6dc7")
        #expect(hexString(key.subkey(.chunkHeader)) == "b91b763097c3d0c6753a83de87a0fad5e564ec061fe0260e5c340817d5a89a7e")
        #expect(try SessionKey(bytes: Array(0..<32)) == key)
    }

    @Test func epochZeroIsStillWrittenAsV1() throws {
        let path = "\(dir)/new.key"
        let key = SessionKey.generate()
        try key.write(to: path)
        #expect(text(path).hasPrefix("huddle-session-key v1 ") && text(path).split(separator: " ").count == 3)
        #expect(try SessionKey.load(from: path) == key)
    }

    @Test func aV2KeyRoundTripsWithItsEpochSessionAndHead() throws {
        let genesis = SessionKey.generate()
        let head = [UInt8](repeating: 0xAB, count: 32)
        let key = try SessionKey(bytes: SecureRandom.bytes(32), epoch: 3, sessionID: genesis.sessionID, head: head)
        let path = "\(dir)/v2.key"
        try key.write(to: path)
        #expect(mode(path) == 0o600)
        #expect(text(path) == "huddle-session-key v2 3 \(genesis.fingerprint) \(hexString(head)) \(Data(key.bytes).base64EncodedString())\n")
        let loaded = try SessionKey.load(from: path)
        #expect(loaded == key && loaded.fingerprint == genesis.fingerprint, "the fingerprint names the session across epochs")
        #expect(loaded.subkey(.handshakePSK) != genesis.subkey(.handshakePSK))
    }

    /// v1 → v2: a member at epoch 0 moves to epoch 1 and rewrites its file; a restart reads epoch 1.
    @Test func theRewriteReplacesAV1FileAtomicallyWithMode0600() throws {
        let path = "\(dir)/member.key"
        let genesis = SessionKey.generate()
        try genesis.write(to: path)
        let next = try SessionKey(bytes: SecureRandom.bytes(32), epoch: 1, sessionID: genesis.sessionID, head: [UInt8](repeating: 1, count: 32))
        let inodeBefore = (try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int) ?? -1
        try next.rewrite(at: path)
        #expect(try SessionKey.load(from: path) == next)
        #expect(mode(path) == 0o600)
        let inodeAfter = (try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int) ?? -1
        #expect(inodeBefore != inodeAfter, "a new file was renamed over the old one, not the old one rewritten in place")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["member.key"], "no temporary file is left behind")
        // And again, v2 → v2.
        let third = try SessionKey(bytes: SecureRandom.bytes(32), epoch: 2, sessionID: genesis.sessionID, head: [UInt8](repeating: 2, count: 32))
        try third.rewrite(at: path)
        #expect(try SessionKey.load(from: path) == third)
    }

    /// Under a umask that would leave the owner without read access, the rewritten file is still 0600.
    /// The umask is set on a thread with its own file-system attributes (`unshare(CLONE_FS)`): the
    /// process's umask is shared by every test running beside this one, and a file another test
    /// created meanwhile would get mode 0400.
    @Test func theRewriteSetsMode0600WhateverTheUmask() async throws {
        let path = "\(dir)/umask.key"
        try SessionKey.generate().write(to: path)
        let rewritten = await offThePool { () -> Result<Void, CryptoError> in
            guard unshareFileSystemAttributes() else { return .failure(CryptoError("unshare(CLONE_FS) failed: errno \(errno)")) }
            umask(0o277)
            do { try SessionKey.generate().rewrite(at: path) } catch { return .failure(error as? CryptoError ?? CryptoError("\(error)")) }
            return .success(())
        }
        try rewritten.get()
        #expect(mode(path) == 0o600)
    }

    /// The rewrite only replaces a file that would load: not a missing path, a symbolic link, or a key
    /// file others can read; and it leaves them as they were.
    @Test func theRewriteRefusesWhatWouldNotLoad() throws {
        let key = SessionKey.generate()
        #expect(throws: CryptoError.self) { try key.rewrite(at: "\(dir)/missing.key") }
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/missing.key"))
        let real = "\(dir)/real.key", link = "\(dir)/link.key"
        try SessionKey.generate().write(to: real)
        #expect(symlink(real, link) == 0)
        #expect(throws: CryptoError.self) { try key.rewrite(at: link) }
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == real, "the link is still a link")
        let open = "\(dir)/open.key"
        try SessionKey.generate().write(to: open)
        chmod(open, 0o644)
        #expect(throws: CryptoError.self) { try key.rewrite(at: open) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["link.key", "open.key", "real.key"])
    }

    @Test(arguments: [
        "huddle-session-key v2 01 eeda797f79781a37 \(String(repeating: "ab", count: 32)) AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "huddle-session-key v2 -1 eeda797f79781a37 \(String(repeating: "ab", count: 32)) AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "huddle-session-key v2 2 eeda797f79781a3 \(String(repeating: "ab", count: 32)) AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "huddle-session-key v2 2 eeda797f79781a37 \(String(repeating: "ab", count: 31)) AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "huddle-session-key v2 2 eeda797f79781a37 \(String(repeating: "zz", count: 32)) AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "huddle-session-key v2 2 eeda797f79781a37 \(String(repeating: "ab", count: 32)) AAAA",
        "huddle-session-key v2 2 eeda797f79781a37 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        // Epoch 0 must name its own session id and head.
        "huddle-session-key v2 0 0000000000000000 \(String(repeating: "ab", count: 32)) AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "huddle-session-key v3 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
    ])
    func malformedV2FilesAreRefusedInOneLine(contents: String) throws {
        let path = file("bad.key", contents)
        do {
            _ = try SessionKey.load(from: path)
            Issue.record("loaded \(contents)")
        } catch let error as CryptoError {
            #expect(error.message.contains(path) && !error.message.contains("\n"), "\(error.message)")
        }
    }

    @Test func aV2FileAtEpochZeroNamingItsOwnGenesisLoads() throws {
        let genesis = try SessionKey(bytes: Array(0..<32))
        let path = file("zero.key", "huddle-session-key v2 0 \(genesis.fingerprint) \(hexString(genesis.head)) \(Data(genesis.bytes).base64EncodedString())\n")
        #expect(try SessionKey.load(from: path) == genesis)
    }
}
