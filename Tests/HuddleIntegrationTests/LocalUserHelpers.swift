import Foundation
import HuddleTestSupport

/// The uid and gid the tests run other local users' processes as (nobody).
let otherUID: uid_t = 65534

/// Runs `executable` with `arguments` as uid and gid 65534 with no supplementary groups (setpriv
/// execs it, so the process id is the program's). Needs root, as the tests here run.
func startAsOtherUser(_ executable: String, _ arguments: [String], stdout: String, stderr: String) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
    process.arguments = ["--reuid=\(otherUID)", "--regid=\(otherUID)", "--clear-groups", executable] + arguments
    for path in [stdout, stderr] { _ = FileManager.default.createFile(atPath: path, contents: nil) }
    process.standardOutput = FileHandle(forWritingAtPath: stdout)
    process.standardError = FileHandle(forWritingAtPath: stderr)
    try TestProcesses.launch(process)
    return process
}

/// The inotify events naming entries of one directory, read without blocking.
final class DirectoryWatch {
    private let fd: Int32

    init(_ directory: String) throws {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0, inotify_add_watch(fd, directory, UInt32(IN_CREATE | IN_ATTRIB | IN_MOVED_TO)) >= 0 else {
            throw TestTimeout(description: "cannot watch \(directory): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(fd) }

    /// Every event since the last call, as (mask, name), in order.
    func events() -> [(mask: UInt32, name: String)] {
        var events: [(mask: UInt32, name: String)] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return events }
            var offset = 0
            // struct inotify_event: wd (4), mask (4), cookie (4), len (4), name (len, NUL-padded).
            while offset + 16 <= n {
                func field(_ at: Int) -> UInt32 { buffer[(offset + at)..<(offset + at + 4)].reversed().reduce(0) { $0 << 8 | UInt32($1) } }
                let mask = field(4), length = Int(field(12))
                let nameBytes = buffer[(offset + 16)..<min(offset + 16 + length, n)].prefix { $0 != 0 }
                events.append((mask, String(decoding: nameBytes, as: UTF8.self)))
                offset += 16 + length
            }
        }
    }
}

/// A TCP connection to 127.0.0.1:`port` from source address `source` (any of 127/8 is loopback),
/// that sends nothing: a handshake left half-open. Returns the descriptor.
func connectFrom(_ source: String, toPort port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestTimeout(description: "socket: \(String(cString: strerror(errno)))") }
    func address(_ host: String, _ port: Int) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &a.sin_addr)
        return a
    }
    var local = address(source, 0), remote = address("127.0.0.1", port)
    let size = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }
    let connected = bound == 0 ? withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, size) } } : -1
    guard connected == 0 else {
        let why = String(cString: strerror(errno))
        close(fd)
        throw TestTimeout(description: "cannot connect from \(source) to 127.0.0.1:\(port): \(why)")
    }
    return fd
}

/// Whether the other end closed `fd` (end of stream or reset), without blocking or consuming data.
func peerClosed(_ fd: Int32) -> Bool {
    var byte: UInt8 = 0
    let n = recv(fd, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK))
    if n == 0 { return true }
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK
}

/// The owner of `path` (following links), or nil when it cannot be read.
func ownerOf(_ path: String) -> uid_t? {
    var info = stat()
    return stat(path, &info) == 0 ? info.st_uid : nil
}
