import Foundation
import HuddleControl
import HuddleCrypto
import HuddleTestSupport
import Testing

/// `examples/systemd/huddle.service` is `Type=notify`: systemd waits for `READY=1` on the datagram
/// socket named by `NOTIFY_SOCKET` before it counts the node started, and expects `STOPPING=1`
/// when a stop begins (sd_notify(3)). Here the test stands in for systemd: it binds that socket,
/// runs `huddle run --config FILE` as the unit does (with a data directory), reads what the node
/// says, stops it with SIGTERM (the unit's KillSignal) and starts it again (`systemctl restart`).
@Suite(.timeLimit(.minutes(5)))
struct SystemdNotifyProcessTests {
    /// systemd's own socket is a path (/run/systemd/notify); sd_notify also accepts an abstract
    /// name (a leading `@`), which containers use.
    @Test(arguments: ["path", "abstract"])
    func theNodeSaysReadyOnceItAnswersAndStoppingAtSigterm(_ kind: String) async throws {
        await ClusterSlots.shared.acquire()
        var template = Array("/tmp/hd-notify-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestTimeout(description: "mkdtemp failed") }
        let dir = String(cString: made)
        let name = kind == "path" ? "\(dir)/notify.sock" : "@huddle-test-notify-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let notify = try NotifySocket(name)
        var started: [Process] = []
        defer {
            notify.close()
            TestProcesses.end(started) { try? FileManager.default.removeItem(atPath: dir) }
            Task { await ClusterSlots.shared.release() }
        }
        try SessionKey.generate().write(to: "\(dir)/session.key")
        // The unit's config file, with this test's paths (relative paths are the file's directory's).
        let config = "\(dir)/huddle.toml"
        try """
            key = "session.key"
            data-dir = "data"
            control = "huddle.sock"
            listen = "127.0.0.1:0"
            name = "svc"
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let control = "\(dir)/huddle.sock"

        /// One `huddle run`, as systemd starts it: what it said up to READY=1, and its member id
        /// read from the control socket right after READY=1, in one request (no retry: once the
        /// node is ready it answers).
        func start(_ run: Int) async throws -> (process: Process, member: String, resumed: Bool) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: huddleBinary)
            process.arguments = ["run", "--config", config]
            var environment = ProcessInfo.processInfo.environment
            environment["NOTIFY_SOCKET"] = name
            process.environment = environment
            let log = "\(dir)/run\(run).log"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: log)
            process.standardOutput = FileHandle.nullDevice
            try TestProcesses.launch(process)
            started.append(process)
            func output() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

            var said: [String] = []
            try await eventually("run \(run) to send READY=1 to \(name)", within: 60) {
                said += notify.received()
                guard process.isRunning || said.contains("READY=1") else { throw TestTimeout(description: "huddle run exited (\(process.terminationStatus)): \(output())") }
                return said.contains("READY=1")
            }
            let client = try await ControlClient.connect(path: control)
            let status = try await client.ask("status")
            await client.close()
            said += notify.received()
            #expect(said.filter { $0 == "READY=1" }.count == 1 && !said.contains("STOPPING=1"), "run \(run): READY=1 once, no STOPPING=1 before a stop: \(said)")
            return (process, status["member"]?.stringValue ?? "", status["resumed"] == .bool(true))
        }

        /// SIGTERM, as `systemctl stop` sends (KillSignal=SIGTERM): STOPPING=1, then exit 0.
        func stop(_ process: Process, _ run: Int) async throws {
            kill(process.processIdentifier, SIGTERM)
            var said: [String] = []
            try await eventually("run \(run) to send STOPPING=1 after SIGTERM", within: 60) {
                said += notify.received()
                return said.contains("STOPPING=1")
            }
            #expect(await process.exitStatus(within: 60) == 0, "a stop is a clean exit (systemd would count another status as a failure)")
            said += notify.received()
            #expect(said.filter { $0 == "STOPPING=1" }.count == 1 && !said.contains("READY=1"), "run \(run): STOPPING=1 once: \(said)")
        }

        let first = try await start(1)
        #expect(!first.member.isEmpty && !first.resumed)
        try await stop(first.process, 1)
        #expect(FileManager.default.fileExists(atPath: "\(dir)/data/state.sqlite"), "a stop keeps the state")

        // `systemctl restart`: the same member again, ready again.
        let second = try await start(2)
        #expect(second.member == first.member, "the same member after a stop and a start")
        #expect(second.resumed)
        try await stop(second.process, 2)
    }
}

/// A Unix datagram socket bound at `name` (a path, or an abstract name after `@`), read without
/// blocking: what systemd's notification socket receives.
final class NotifySocket: @unchecked Sendable {
    // @unchecked: `fd` is set once; reads and the close happen on the test's own task.
    private let fd: Int32
    private let path: String?

    init(_ name: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw TestTimeout(description: "socket(AF_UNIX, SOCK_DGRAM): \(String(cString: strerror(errno)))") }
        var bytes = Array(name.utf8)
        path = bytes.first == UInt8(ascii: "@") ? nil : name
        if path == nil { bytes[0] = 0 }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw TestTimeout(description: "socket name too long: \(name)") }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (path == nil ? 0 : 1))
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0 else {
            let error = String(cString: strerror(errno))
            Glibc.close(fd)
            throw TestTimeout(description: "bind \(name): \(error)")
        }
    }

    /// The assignments (`READY=1`, …) of every datagram waiting now; one datagram may hold several, a line each.
    func received() -> [String] {
        var out: [String] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            out += String(decoding: buffer.prefix(n), as: UTF8.self).split(separator: "\n").map(String.init)
        }
        return out
    }

    func close() {
        Glibc.close(fd)
        if let path { unlink(path) }
    }
}
