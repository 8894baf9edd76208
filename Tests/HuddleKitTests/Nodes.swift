import Foundation
import HuddleTestSupport
import HuddleControl
import HuddleKit
import Testing

/// Where the `huddle` executable under test is (`BuiltExecutables`).
let huddleBinary = BuiltExecutables.path("huddle")

struct Timeout: Error, CustomStringConvertible { let description: String }

/// Polls `condition` until it holds or `seconds` pass (generous: the machine is small and shared).
func eventually(_ what: String, within seconds: Double = 60, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    var last: (any Error)?
    while ContinuousClock.now < deadline {
        do { if try await condition() { return } } catch { last = error }
        try await Task.sleep(for: .milliseconds(50))
    }
    throw Timeout(description: "timed out after \(seconds) s waiting for \(what)" + (last.map { "; last error: \($0)" } ?? ""))
}

/// Everything a sequence yields, collected in the background until its end.
actor Collected<Element: Sendable> {
    private(set) var elements: [Element] = []
    private(set) var ended = false

    init<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element == Element, S.Failure == Never {
        Task { await self.run(sequence) }
    }

    private func run<S: AsyncSequence & Sendable>(_ sequence: S) async where S.Element == Element, S.Failure == Never {
        for await element in sequence { append(element) }
        finish()
    }

    private func append(_ element: Element) { elements.append(element) }
    private func finish() { ended = true }
}

/// The `huddle run` processes of one test, in a directory of their own, sharing one session key.
final class Nodes: @unchecked Sendable {
    // @unchecked: `processes` is only touched by the test's own task (start, then shutdown).
    let dir: String
    let key: String
    private var processes: [String: Process] = [:]
    private(set) var firstAddress: String?
    /// Whether these nodes hold one of the test process's `ClusterSlots`.
    private var holdsSlot = false

    init(_ label: String) throws {
        var template = Array("/tmp/hk-\(label.prefix(8))-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Timeout(description: "mkdtemp failed") }
        dir = String(cString: made)
        key = "\(dir)/session.key"
        let keygen = Process()
        keygen.executableURL = URL(fileURLWithPath: huddleBinary)
        keygen.arguments = ["keygen", "--out", key]
        keygen.standardOutput = FileHandle.nullDevice
        try TestProcesses.launch(keygen)
        keygen.waitUntilExit()
        guard keygen.terminationStatus == 0 else { throw Timeout(description: "huddle keygen failed (HUDDLE_BIN \(huddleBinary))") }
    }

    func control(_ name: String) -> String { "\(dir)/\(name).sock" }

    /// Starts node `name` (joining the first node started) and returns its control path once it answers.
    @discardableResult
    func start(_ name: String, dataDir: String? = nil) async throws -> String {
        if !holdsSlot {
            await ClusterSlots.shared.acquire()
            holdsSlot = true
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: huddleBinary)
        var arguments = ["run", "--key", key, "--listen", "127.0.0.1:0", "--name", name, "--control", control(name),
                         "--data-dir", dataDir ?? "\(dir)/\(name).data-\(processes.count)"]
        if let firstAddress { arguments += ["--join", firstAddress] }
        process.arguments = arguments
        let log = "\(dir)/\(name).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log)
        process.standardOutput = FileHandle.nullDevice
        try TestProcesses.launch(process)
        processes[name] = process
        var status: JSONObject = [:]
        try await eventually("\(name) to answer status") {
            guard process.isRunning else { throw Timeout(description: "\(name) exited: \(self.log(name))") }
            let client = try await ControlClient.connect(path: self.control(name))
            defer { Task { await client.close() } }
            status = try await client.ask("status")
            return true
        }
        if firstAddress == nil { firstAddress = status["addr"]?.stringValue }
        return control(name)
    }

    /// Starts node `name` and connects a session of the tests' activity type to it (not joined yet).
    func session(_ name: String) async throws -> GroupSession<Drawing> {
        try await GroupSession<Drawing>.connect(control: try await start(name))
    }

    func log(_ name: String) -> String { (try? String(contentsOfFile: "\(dir)/\(name).log", encoding: .utf8)) ?? "" }

    /// Whether node `name` has exited (it must have been started).
    func hasExited(_ name: String) throws -> Bool {
        guard let process = processes[name] else { throw Timeout(description: "no node \(name)") }
        return !process.isRunning
    }

    /// SIGKILL: the node vanishes without leaving.
    func kill(_ name: String) async throws {
        guard let process = processes[name] else { return }
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        try await eventually("\(name) to die") { !process.isRunning }
    }

    /// SIGKILL to every node still running (teardown: nothing is checked any more); returns at
    /// once, the wait runs off the test pool.
    func shutdown() {
        if holdsSlot {
            holdsSlot = false
            Task { await ClusterSlots.shared.release() }
        }
        let dir = self.dir
        TestProcesses.end(Array(processes.values)) { try? FileManager.default.removeItem(atPath: dir) }
    }
}
