import Foundation
import Testing
@testable import HuddleCrypto

/// Issue 20 item 5: key and identity files are opened with `O_NOFOLLOW` and checked on the open
/// descriptor (a regular file, owned by us, no group or other bits, small) before they are read.
@Suite(.timeLimit(.minutes(1)))
final class KeyFileHardeningTests {
    let dir: String

    deinit { try? FileManager.default.removeItem(atPath: dir) }

    init() throws {
        var template = Array("/tmp/hd-keyfile-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CryptoError("mkdtemp failed") }
        dir = String(cString: made)
    }

    /// The error `SessionKey.load` throws for `path`, or nil when it loaded.
    private func refusal(_ path: String) -> String? {
        do {
            _ = try SessionKey.load(from: path)
            return nil
        } catch let error as CryptoError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    @Test func aSymbolicLinkToAGoodKeyIsRefused() throws {
        let real = "\(dir)/real.key", link = "\(dir)/link.key"
        try SessionKey.generate().write(to: real)
        #expect(symlink(real, link) == 0)
        #expect(refusal(real) == nil, "premise: the file itself loads")
        let message = try #require(refusal(link), "a key read through a symbolic link")
        #expect(message.contains(link) && message.contains("symbolic link") && !message.contains("\n"), "\(message)")
    }

    @Test func anIdentityFileBehindASymbolicLinkIsRefused() throws {
        let real = "\(dir)/real.id", link = "\(dir)/link.id"
        _ = try Identity.loadOrCreate(path: real)
        #expect(symlink(real, link) == 0)
        #expect(throws: CryptoError.self, "an identity read through a symbolic link") { try Identity.loadOrCreate(path: link) }
    }

    /// A FIFO would block `open` for reading until a writer came; it is refused at once.
    @Test func aFIFOIsRefusedWithoutHanging() throws {
        let fifo = "\(dir)/fifo.key"
        #expect(mkfifo(fifo, 0o600) == 0)
        let message = try #require(refusal(fifo), "a FIFO as the key file")
        #expect(message.contains(fifo) && message.contains("not a regular file"), "\(message)")
    }

    @Test func aDirectoryIsRefused() throws {
        let directory = "\(dir)/d.key"
        #expect(mkdir(directory, 0o700) == 0)
        #expect(refusal(directory) != nil)
    }

    @Test func aGroupReadableKeyIsRefused() throws {
        let path = "\(dir)/group.key"
        try SessionKey.generate().write(to: path)
        #expect(chmod(path, 0o640) == 0)
        let message = try #require(refusal(path))
        #expect(message.contains("readable by group or others") && message.contains("chmod 600 \(path)"), "\(message)")
    }

    @Test func aLargeFileIsRefusedBeforeItIsRead() throws {
        let path = "\(dir)/large.key"
        var text = "huddle-session-key v1 \(Data(SessionKey.generate().bytes).base64EncodedString())\n"
        text += String(repeating: " ", count: KeyFile.maximumFileBytes)
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        let message = try #require(refusal(path), "a key file over \(KeyFile.maximumFileBytes) bytes")
        #expect(message.contains(path) && message.contains("bytes"), "\(message)")
    }

    /// Runs as root here, so a file owned by uid 65534 (nobody) can be made with chown.
    @Test func aKeyOwnedByAnotherUserIsRefused() throws {
        let path = "\(dir)/theirs.key"
        try SessionKey.generate().write(to: path)
        try #require(chown(path, 65534, 65534) == 0, "this test needs root to chown: \(String(cString: strerror(errno)))")
        let message = try #require(refusal(path), "a key file owned by uid 65534")
        #expect(message.contains(path) && message.contains("uid 65534"), "\(message)")
    }
}
