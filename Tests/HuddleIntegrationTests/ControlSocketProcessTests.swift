import Foundation
import HuddleTestSupport
import HuddleControl
import Testing

/// A `huddle run` started by hand, through `sh` so it gets the umask given (`exec` keeps the pid):
/// with umask 000 every file mode the node ends up with is one it set itself.
final class HandStartedRun: @unchecked Sendable {
    // @unchecked: set once in init; `Process` is thread-safe for the calls made here.
    let process = Process()
    let stderrPath: String

    init(_ arguments: [String], stderr: String, umask: String = "000") throws {
        stderrPath = stderr
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "umask \(umask) && exec \"$0\" \"$@\"", huddleBinary] + arguments
        _ = FileManager.default.createFile(atPath: stderr, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: stderr)
        process.standardOutput = FileHandle.nullDevice
        try TestProcesses.launch(process)
    }

    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    func waitForExit(within seconds: Double = 60) async throws -> Int32 {
        try await eventually("huddle run to exit (stderr: \(stderr))", within: seconds) { !process.isRunning }
        return process.terminationStatus
    }

    func kill(_ signal: Int32 = SIGKILL) {
        if process.isRunning { Glibc.kill(process.processIdentifier, signal) }
    }
}

/// `status` from the node answering at `control`, retried until it does; fails at once if `run`
/// (the node expected to answer) exits.
private func statusAt(_ control: String, of run: HandStartedRun, within seconds: Double = 60) async throws -> JSONObject {
    let deadline = ContinuousClock.now + .seconds(seconds)
    var lastError: (any Error)?
    while ContinuousClock.now < deadline {
        guard run.process.isRunning else {
            throw TestTimeout(description: "the node expected at \(control) exited (\(run.process.terminationStatus)): \(run.stderr)")
        }
        do {
            let client = try await ControlClient.connect(path: control)
            defer { Task { await client.close() } }
            return try await client.ask("status")
        } catch {
            lastError = error
        }
        try await Task.sleep(for: .milliseconds(50))
    }
    let socket = fileMode(control).map { "mode \(String($0.permissions, radix: 8)), type \($0.type == S_IFSOCK ? "socket" : "not a socket")" } ?? "no file"
    throw TestTimeout(description: "no status from \(control) (\(socket)) within \(seconds) s; last error: \(lastError.map { "\($0)" } ?? "none"); the node's stderr: \(run.stderr)")
}

/// The file type and permission bits at `path` (not following a link).
private func fileMode(_ path: String) -> (type: mode_t, permissions: mode_t)? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    return (info.st_mode & S_IFMT, info.st_mode & 0o777)
}

@Suite(.timeLimit(.minutes(10)))
struct ControlSocketProcessTests {
    /// DESIGN: "Control socket: mode 0600 (inside a 0700 directory when the node creates one); a
    /// second node on the same path is refused". The node runs with umask 000, so 0600 / 0700 are
    /// the node's doing. A node killed with SIGKILL leaves its socket file; a new node on the same
    /// path must replace it and answer, and a further node must then be refused without taking it.
    @Test func theControlSocketIsPrivateAndAStaleOneFromAKilledNodeIsReplaced() async throws {
        let cluster = try TestCluster("ctlsock")
        var runs: [HandStartedRun] = []
        defer {
            for run in runs { run.kill() }
            for run in runs { run.process.waitUntilExit() }
            cluster.shutdown()
        }
        let directory = "\(cluster.dir)/control"
        let control = "\(directory)/node.sock"
        func run(_ name: String) throws -> HandStartedRun {
            let started = try HandStartedRun(["run", "--key", cluster.key, "--listen", "127.0.0.1:0", "--name", name, "--control", control,
                                              "--data-dir", "\(cluster.dir)/\(name).data"], stderr: "\(cluster.dir)/\(name).log")
            runs.append(started)
            return started
        }

        let first = try run("first")
        let firstMember = try await statusAt(control, of: first)["member"]?.stringValue
        #expect(firstMember != nil)
        let socketMode = fileMode(control)
        #expect(socketMode?.type == S_IFSOCK, "\(control) is a socket")
        #expect(socketMode?.permissions == 0o600, "control socket mode \(String(socketMode?.permissions ?? 0, radix: 8)), not 600")
        #expect(fileMode(directory)?.permissions == 0o700, "the directory the node created has mode \(String(fileMode(directory)?.permissions ?? 0, radix: 8)), not 700")

        first.kill(SIGKILL)
        _ = try await first.waitForExit()
        #expect(fileMode(control)?.type == S_IFSOCK, "premise: a SIGKILLed node leaves its socket file behind")

        let second = try run("second")
        let secondMember = try await statusAt(control, of: second)["member"]?.stringValue
        #expect(secondMember != nil && secondMember != firstMember, "the node answering is the new one (\(second.stderr))")
        #expect(fileMode(control)?.permissions == 0o600)

        let third = try run("third")
        let code = try await third.waitForExit()
        #expect(code != 0, "a second live node on the same control path must be refused")
        #expect(third.stderr.contains("already running"), "\(third.stderr)")
        #expect(try await statusAt(control, of: second)["member"]?.stringValue == secondMember, "the live node keeps its socket")
        #expect(fileMode(control)?.permissions == 0o600)
        #expect(second.process.isRunning)
    }

    /// DESIGN: "`huddle run` refuses a key file readable by group or others, like ssh does" — with
    /// one clear line on stderr, a non-zero exit, and no control socket. The same key at 0600 runs.
    @Test func runRefusesAGroupOrOtherReadableKeyFileWithOneClearLine() async throws {
        let cluster = try TestCluster("keymode")
        var runs: [HandStartedRun] = []
        defer {
            for run in runs { run.kill() }
            for run in runs { run.process.waitUntilExit() }
            cluster.shutdown()
        }
        let key = try Data(contentsOf: URL(fileURLWithPath: cluster.key))
        for mode: mode_t in [0o640, 0o604] {
            let octal = String(mode, radix: 8)
            let path = "\(cluster.dir)/key-\(octal).key"
            try key.write(to: URL(fileURLWithPath: path))
            #expect(chmod(path, mode) == 0)
            let control = "\(cluster.dir)/k\(octal).sock"
            let refused = try HandStartedRun(["run", "--key", path, "--listen", "127.0.0.1:0", "--control", control,
                                              "--data-dir", "\(cluster.dir)/k\(octal).data"], stderr: "\(cluster.dir)/k\(octal).log", umask: "022")
            runs.append(refused)
            // Either it exits (refused), or its control socket appears (it started): no need to
            // wait out a deadline to tell.
            try await eventually("huddle run with a mode-\(octal) key to exit or come up", within: 60) {
                !refused.process.isRunning || FileManager.default.fileExists(atPath: control)
            }
            if refused.process.isRunning, (try? await refused.waitForExit(within: 5)) == nil {
                Issue.record("mode \(octal): huddle run started with a key file readable by group or others: \(refused.stderr)")
                refused.kill()
                continue
            }
            let code = refused.process.terminationStatus
            #expect(code != 0, "mode \(octal): huddle run exited \(code)")
            let lines = refused.stderr.split(separator: "\n", omittingEmptySubsequences: true)
            #expect(lines.count == 1, "mode \(octal): stderr must be one line, got \(lines.count): \(refused.stderr)")
            let line = lines.first.map(String.init) ?? ""
            #expect(line.contains(path) && line.contains("readable by group or others") && line.contains("chmod 600"), "mode \(octal): \(line)")
            #expect(!FileManager.default.fileExists(atPath: control), "mode \(octal): no control socket for a refused key")
        }
        let good = "\(cluster.dir)/key-600.key"
        try key.write(to: URL(fileURLWithPath: good))
        #expect(chmod(good, 0o600) == 0)
        let node = try await cluster.start("ok", key: good)
        #expect(try await node.aliveMembers() == 1, "the same key at 0600 runs")
    }
}
