import Foundation
import HuddleControl
import Testing

/// Issue 20 item 5: a control socket path or directory of another user's is refused, in one line
/// naming the path and the owner. Runs as root here, so other users' files are made with chown.
@Suite final class ControlPathCheckTests {
    let dir: String

    deinit { try? FileManager.default.removeItem(atPath: dir) }

    init() throws {
        var template = Array("/tmp/hd-ctlpath-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ControlError.closed }
        dir = String(cString: made)
    }

    /// Binds a Unix socket at `path` (and leaves its file behind, as a killed node does).
    private func makeSocket(_ path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0, "bind \(path): \(String(cString: strerror(errno)))")
    }

    private func refusal(_ path: String, allowRoot: Bool = false) -> String? {
        do {
            _ = try ControlPathCheck.check(path, allowRoot: allowRoot)
            return nil
        } catch {
            return error.message
        }
    }

    @Test func nothingThereAndAStaleSocketOfOursPass() throws {
        #expect(try ControlPathCheck.check("\(dir)/none.sock") == .nothing)
        try makeSocket("\(dir)/ours.sock")
        #expect(try ControlPathCheck.check("\(dir)/ours.sock") == .socket)
    }

    @Test func aSocketPreCreatedByAnotherUserIsRefused() throws {
        let path = "\(dir)/theirs.sock"
        try makeSocket(path)
        try #require(lchown(path, 65534, 65534) == 0, "this test needs root to chown")
        let message = try #require(refusal(path), "a socket owned by uid 65534")
        #expect(message.contains(path) && message.contains("uid 65534") && !message.contains("\n"), "\(message)")
        // The uid given is the one trusted: for uid 65534 it is its own socket.
        #expect(try ControlPathCheck.check(path, uid: 65534) == .socket)
    }

    @Test func aRootSocketIsTrustedByAClientOnly() throws {
        let path = "\(dir)/root.sock"
        try makeSocket(path)
        #expect(try ControlPathCheck.check(path, uid: 65534, allowRoot: true) == .socket)
        #expect(throws: ControlError.self) { try ControlPathCheck.check(path, uid: 65534) }
    }

    @Test func aDirectoryOfAnotherUserIsRefused() throws {
        let directory = "\(dir)/theirs"
        #expect(mkdir(directory, 0o755) == 0)
        try #require(chown(directory, 65534, 65534) == 0)
        let message = try #require(refusal("\(directory)/node.sock"))
        #expect(message.contains(directory) && message.contains("uid 65534"), "\(message)")
    }

    @Test func aDirectoryOthersMayWriteIsRefusedUnlessSticky() throws {
        let open = "\(dir)/open", sticky = "\(dir)/sticky"
        #expect(mkdir(open, 0o700) == 0 && chmod(open, 0o777) == 0)
        #expect(mkdir(sticky, 0o700) == 0 && chmod(sticky, 0o1777) == 0)
        let message = try #require(refusal("\(open)/node.sock"))
        #expect(message.contains("writable by group or others"), "\(message)")
        #expect(try ControlPathCheck.check("\(sticky)/node.sock") == .nothing, "a sticky directory such as /tmp")
    }

    @Test func aPathThatIsNotASocketIsRefused() throws {
        let path = "\(dir)/file.sock"
        _ = FileManager.default.createFile(atPath: path, contents: Data("x".utf8))
        let message = try #require(refusal(path))
        #expect(message.contains("not a socket"), "\(message)")
    }

    @Test func aClientDoesNotConnectToAnotherUsersSocket() async throws {
        let path = "\(dir)/client.sock"
        try makeSocket(path)
        try #require(lchown(path, 65534, 65534) == 0)
        do {
            _ = try await ControlClient.connect(path: path)
            Issue.record("connected to a socket owned by uid 65534")
        } catch {
            guard error.code == .untrustedPath else { Issue.record("\(error)"); return }
            #expect("\(error)".contains("uid 65534"))
        }
    }
}
