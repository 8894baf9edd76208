import Foundation
import HuddleControl
import HuddleKit
import HuddleTestSupport
import Testing

@Suite("Apple's DrawTogether code against real nodes (issue 38 item 2)", .timeLimit(.minutes(10)))
struct AppleCodeTests {
    @Test func applesCodeRunsOnTwoNodesWithEveryNameOfTheIssue() async throws {
        let nodes = try TwoNodes()
        defer { nodes.shutdown() }
        let annControl = try await nodes.start("ann")
        let benControl = try await nodes.start("ben")
        let seen = Seen()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await GroupActivityEnvironment.$control.withValue(benControl) { try await benProgram(seen) } }
            group.addTask { try await GroupActivityEnvironment.$control.withValue(annControl) { try await annProgram(seen) } }
            try await group.waitForAll()
        }
        let v = await seen.values
        #expect(v["ann.1.initiated"] == "true" && v["ben.1.initiated"] == "false")
        #expect(v["ann.1.id"] != nil && v["ann.1.id"] == v["ben.1.id"], "one id at both")
        #expect(v["ann.2.id"] == v["ben.2.id"] && v["ann.2.id"] != v["ann.1.id"], "a new session per activation")
        #expect(v["ann.1.title"] == "Draw Together")
        #expect(v["ann.1.ben"] == v["ben.1.me"] && v["ben.1.ann"] == v["ann.1.me"] && v["ann.1.from"] == v["ben.1.me"], "context.source names the sender")
        #expect(v["ben.1.colors"] == "red,blue,green")
        #expect(v["ben.1.bytes"] == "[0, 1, 2, 255]")
        #expect(v["ben.1.image"] == "300000 [0, 7, 14, 21] 10.0,20.0")
        #expect(v["ben.1.activity"] == "Draw Together")
        #expect(v["ann.1.state"] == "true")
        #expect(v["ben.1.reason"] == HuddleKitError.ended.description, "end() invalidates everyone")
        #expect(v["ben.2.state"] == "true")
        #expect(v["ann.2.state"] == "true")
        for name in ["ann", "ben"] { #expect(try nodes.isRunning(name), "leave() and end() leave the node up") }
    }
}

/// Two `huddle run` processes sharing one session key, in a directory of their own.
final class TwoNodes: @unchecked Sendable {
    // @unchecked: `processes` and `firstAddress` are only touched by the test's own task (start, then shutdown).
    let dir: String
    private let key: String
    private var processes: [String: Process] = [:]
    private var firstAddress: String?
    private var holdsSlot = false
    private let binary = BuiltExecutables.path("huddle")

    init() throws {
        var template = Array("/tmp/hk-apple-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw AppleCodeFailure(description: "mkdtemp failed") }
        dir = String(cString: made)
        key = "\(dir)/session.key"
        let keygen = Process()
        keygen.executableURL = URL(fileURLWithPath: binary)
        keygen.arguments = ["keygen", "--out", key]
        keygen.standardOutput = FileHandle.nullDevice
        try TestProcesses.launch(keygen)
        keygen.waitUntilExit()
        guard keygen.terminationStatus == 0 else { throw AppleCodeFailure(description: "huddle keygen failed") }
    }

    /// Starts node `name` (joining the first one) and returns its control path once it answers.
    func start(_ name: String) async throws -> String {
        if !holdsSlot { await ClusterSlots.shared.acquire(); holdsSlot = true }
        let control = "\(dir)/\(name).sock"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        var arguments = ["run", "--key", key, "--listen", "127.0.0.1:0", "--name", name, "--control", control, "--data-dir", "\(dir)/\(name).data"]
        if let firstAddress { arguments += ["--join", firstAddress] }
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try TestProcesses.launch(process)
        processes[name] = process
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            if let client = try? await ControlClient.connect(path: control) {
                let status = try? await client.ask("status")
                await client.close()
                if let status, (firstAddress != nil || status["addr"]?.stringValue != nil) {
                    if firstAddress == nil { firstAddress = status["addr"]?.stringValue }
                    if processes.count == 1 || (status["members"]?.intValue ?? 0) >= 2 { return control }
                }
            }
            guard process.isRunning, ContinuousClock.now < deadline else { throw AppleCodeFailure(description: "\(name) did not start") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    func isRunning(_ name: String) throws -> Bool { processes[name]?.isRunning ?? false }

    func shutdown() {
        if holdsSlot { holdsSlot = false; Task { await ClusterSlots.shared.release() } }
        let dir = self.dir
        TestProcesses.end(Array(processes.values)) { try? FileManager.default.removeItem(atPath: dir) }
    }
}
