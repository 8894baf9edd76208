import Foundation
import HuddleTestSupport
import HuddleControl
import HuddleCore
import HuddleCrypto
import Testing

/// The failure detector's timing as the node under test runs it (its SWIM settings are the
/// defaults, `SWIMSettings.lan`): what every pause of a test is derived from.
enum FailureDetector {
    static let settings = SWIMSettings.lan
    /// The shortest a suspicion lasts before the member is failed, at `members` live members.
    static func minimumSuspicion(members: Int) -> Double { SWIMSuspicion.bounds(members: members, settings: settings).min }
    /// The longest (a lone suspecter, no confirmation).
    static func maximumSuspicion(members: Int) -> Double { SWIMSuspicion.bounds(members: members, settings: settings).max }
    /// The longest a test may stop a member (SIGSTOP) that must not be failed: 40 % of the
    /// minimum suspicion timeout (the floor, 2.5 s, at every size a test runs), which leaves the
    /// rest for the first probe to notice, for a loaded machine to resume the member, and for its
    /// refutation to travel.
    static let safePause: Double = 0.4 * settings.minSuspicionTimeout
}

/// Where the `huddle` executable under test is (`BuiltExecutables`).
let huddleBinary = BuiltExecutables.path("huddle")

struct TestTimeout: Error, CustomStringConvertible {
    let description: String
}

/// Polls `condition` until it holds or `seconds` pass (generous: the machine is small and shared).
/// An error thrown by the condition counts as "not yet"; the last one is named in the timeout.
func eventually(_ what: String, within seconds: Double = 30, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    var lastError: (any Error)?
    while ContinuousClock.now < deadline {
        do {
            if try await condition() { return }
        } catch {
            lastError = error
        }
        try await Task.sleep(for: .milliseconds(50))
    }
    do {
        if try await condition() { return }
    } catch {
        lastError = error
    }
    throw TestTimeout(description: "timed out after \(seconds) s waiting for: \(what)" + (lastError.map { "; the condition last threw: \($0)" } ?? ""))
}

/// Runs `attempt` — a whole scenario, on a cluster of its own — until one attempt returns no
/// finding, at most `attempts` times; records the findings of every attempt when all had some.
///
/// For checks that an attack did not make an honest member suspected (or failed): on a loaded
/// machine the failure detector may suspect an honest member of its own accord (a probe answered
/// late), which no check can tell from a suspicion the attack caused. An attack that works causes
/// one in every attempt, so the check still fails then; a suspicion of load's making rarely
/// comes back. Every other check of the scenario is made in each attempt as usual.
func withoutSuspicionByLoad(_ what: String, attempts: Int = 3, sourceLocation: SourceLocation = #_sourceLocation,
                            _ attempt: (Int) async throws -> [String]) async throws {
    var seen: [[String]] = []
    for n in 1...attempts {
        let findings = try await attempt(n)
        if findings.isEmpty {
            if !seen.isEmpty { print("\(what): attempt \(n) clean; earlier attempts saw (load?) \(seen)") }
            return
        }
        seen.append(findings)
    }
    Issue.record("\(what), in each of \(attempts) attempts: \(seen)", sourceLocation: sourceLocation)
}

/// A `huddle run` process with its own port, control socket and data directory.
final class TestNode: @unchecked Sendable {
    // @unchecked: `process` and the paths are set once in init; `Process` itself is thread-safe for
    // the calls made here (isRunning, terminate, terminationStatus, waitUntilExit).
    let name: String
    let control: String
    let process: Process
    let stderrPath: String
    private(set) var addr = ""
    private(set) var member = ""

    /// `keyArguments` replaces `--key KEY` (a node that pairs by invitation passes `--invite` instead).
    /// `dataDir`: run with `--data-dir <dir>/<name>.data` (the node keeps its membership there and
    /// a signal stops it; CONTROL.md, Restart); false: a temporary one, and a signal leaves.
    /// `environment`: variables set for the node on top of the test process's own.
    init(name: String, dir: String, key: String, keyArguments: [String]? = nil, join: [String] = [], extra: [String] = [], dataDir: Bool = true,
         environment: [String: String] = [:]) throws {
        self.name = name
        control = "\(dir)/\(name).sock"
        stderrPath = "\(dir)/\(name).log"
        process = Process()
        process.executableURL = URL(fileURLWithPath: huddleBinary)
        process.arguments = ["run"] + (keyArguments ?? ["--key", key]) + ["--listen", "127.0.0.1:0", "--name", name, "--control", control]
            + (dataDir ? ["--data-dir", "\(dir)/\(name).data"] : []) + join.flatMap { ["--join", $0] } + extra
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        process.standardOutput = FileHandle.nullDevice
        try TestProcesses.launch(process)
    }

    /// Waits for the control socket, then records this node's address and member id.
    func ready() async throws {
        try await eventually("\(name)'s control socket") {
            guard process.isRunning else { throw TestTimeout(description: "\(name) exited: \(log)") }
            return FileManager.default.fileExists(atPath: control)
        }
        // The socket file appears at bind(), a moment before the node accepts on it: retry.
        var status: JSONObject = [:]
        try await eventually("\(name) to answer status") {
            status = try await request("status")
            return true
        }
        addr = status["addr"]?.stringValue ?? ""
        member = status["member"]?.stringValue ?? ""
    }

    func client() async throws -> ControlClient { try await ControlClient.connect(path: control) }

    /// One request on a fresh connection; a reply that does not come within `seconds` fails the
    /// test with the op's name instead of hanging the suite.
    func request(_ op: String, _ fields: JSONObject = [:], within seconds: Double = 300) async throws -> JSONObject {
        let c = try await client()
        defer { Task { await c.close() } }
        return try await withThrowingTaskGroup(of: JSONObject?.self) { group in
            group.addTask { try await c.ask(op, fields) }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let reply = first else {
                await c.close()  // fails the pending request, so the group can finish
                throw TestTimeout(description: "\(name) did not answer \(op) within \(seconds) s")
            }
            return reply
        }
    }

    func aliveMembers() async throws -> Int {
        try await request("status")["members"]?.intValue.map(Int.init) ?? 0
    }

    var log: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// Waits for the process to exit; one that does not fails with the end of its log (what it
    /// was doing when it hung).
    func waitForExit(within seconds: Double = 30) async throws -> Int32 {
        do {
            try await eventually("\(name) to exit", within: seconds) { !process.isRunning }
        } catch {
            let tail = log.split(separator: "\n").suffix(25).joined(separator: "\n")
            throw TestTimeout(description: "\(name) (pid \(process.processIdentifier)) did not exit within \(seconds) s; its log ends:\n\(tail)")
        }
        return process.terminationStatus
    }

    func kill() { if process.isRunning { process.terminate() } }
}

/// Every event one subscriber receives, collected in the background.
///
/// The stream must last until `stop()`: when it ends before that (the node closed the connection
/// or died), errors, or overflows (the node dropped this subscriber), every later read of what was
/// collected (`events`, `messages()`, `memberChanges`, `check()`) fails the test once — a test
/// that waits for an event, or checks that one never came, must not pass on a dead stream.
/// A check that an event never came first calls `catchUp()`: the stream may merely lag.
actor EventCollector {
    private var collected: [JSONObject] = []
    /// The cursors of what was collected (the stream and `catchUp` may both bring an event).
    private var cursors: Set<Int64> = []
    /// The node's cursor when this subscribed, then the highest collected.
    private var latestSeen: Int64 = 0
    private var task: Task<Void, Never>?
    private var client: ControlClient?
    private let node: String
    private let source: TestNode
    private let topics: [String]
    private var stopped = false
    /// Why the stream ended before `stop()`, when it did.
    private(set) var ended: String?
    private var reported = false

    private init(node: TestNode, topics: [String]) {
        self.node = node.name
        source = node
        self.topics = topics
    }

    static func subscribe(_ node: TestNode, topics: [String], since: Int64? = nil) async throws -> EventCollector {
        let collector = EventCollector(node: node, topics: topics)
        let client = try await node.client()
        var request: JSONObject = ["topics": .array(topics.map { .string($0) })]
        if let since { request["since"] = .int(since) }
        let reply = try await client.ask("subscribe", request)
        await collector.start(client, from: since ?? reply["cursor"]?.intValue ?? 0)
        return collector
    }

    /// Waits until every event `node` has logged by now, of this collector's topics, is collected,
    /// whether the stream lags, stalled or died: asks the node for its latest cursor over a
    /// subscription of its own to every topic from the last cursor collected, and takes that
    /// replay up to the latest cursor. A check that something did not happen comes after this.
    func catchUp(within seconds: Double = 30, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let client = try await source.client()
        defer { Task { await client.close() } }
        for event in try await EventReplay.upToNow(client, node: node, from: latestSeen, topics: Set(topics), within: seconds) { add(event) }
    }

    private func start(_ client: ControlClient, from cursor: Int64) {
        latestSeen = cursor
        self.client = client
        task = Task {
            do {
                for try await event in await client.events() {
                    if event["event"]?.stringValue == "overflow" {
                        self.finish("it overflowed (\(event.serializedForLog)): events were dropped")
                        return
                    }
                    self.add(event)
                }
                self.finish("the node closed it")
            } catch {
                self.finish("it failed: \(error)")
            }
        }
    }

    private func add(_ e: JSONObject) {
        if let cursor = e["cursor"]?.intValue {
            guard cursors.insert(cursor).inserted else { return }
            latestSeen = max(latestSeen, cursor)
        }
        collected.append(e)
    }

    private func finish(_ why: String) {
        guard !stopped, ended == nil else { return }
        ended = why
    }

    /// Fails the current test (once) when the stream ended before `stop()`.
    func check(sourceLocation: SourceLocation = #_sourceLocation) {
        guard let ended, !reported else { return }
        reported = true
        Issue.record("\(node)'s event stream ended before the test stopped it: \(ended)", sourceLocation: sourceLocation)
    }

    var events: [JSONObject] {
        check()
        return collected
    }

    func messages(sourceLocation: SourceLocation = #_sourceLocation) -> [JSONObject] {
        check(sourceLocation: sourceLocation)
        return collected.filter { $0["event"]?.stringValue == "message" }
    }
    func memberChanges(_ change: String, sourceLocation: SourceLocation = #_sourceLocation) -> [JSONObject] {
        check(sourceLocation: sourceLocation)
        return collected.filter { $0["event"]?.stringValue == "member" && $0["change"]?.stringValue == change }
    }

    /// For a stream whose node was killed on purpose: what was collected, and the last cursor
    /// (to resume from with `since`); the stream's end is not a failure.
    func endedOnPurpose() async -> (events: [JSONObject], latest: Int64) {
        stopped = true
        task?.cancel()
        await client?.close()
        return (collected, latestSeen)
    }

    func stop() async {
        stopped = true
        task?.cancel()
        await client?.close()
    }
}

extension JSONObject {
    /// The object as one JSON line, for failure messages.
    var serializedForLog: String { JSON.object(self).serialized }
}

/// A temporary directory, a session key, and the nodes of one test; `shutdown` kills what is left.
final class TestCluster: @unchecked Sendable {
    // @unchecked: `nodes` is only appended to by the test's own task, which also calls shutdown.
    let dir: String
    let key: String
    private(set) var nodes: [TestNode] = []

    init(_ label: String) throws {
        var template = Array("/tmp/hd-\(label.prefix(8))-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestTimeout(description: "mkdtemp failed") }
        dir = String(cString: made)
        key = "\(dir)/session.key"
        try SessionKey.generate().write(to: key)
    }

    /// Whether this cluster holds one of the test process's `ClusterSlots`.
    private var holdsSlot = false

    /// Takes this cluster's slot now (once): a test that starts something with a deadline of its
    /// own before its first node (an outside peer the node dials) calls it first, so that the wait
    /// for a slot does not run out that deadline.
    func reserveSlot() async {
        guard !holdsSlot else { return }
        await ClusterSlots.shared.acquire()
        holdsSlot = true
    }

    /// Starts a node; later nodes join the first one unless told otherwise. The first waits for a
    /// slot (`ClusterSlots`): at most so many tests run nodes at once.
    @discardableResult
    func start(_ name: String, join: [String]? = nil, key: String? = nil, keyArguments: [String]? = nil, extra: [String] = [], dataDir: Bool = true,
               environment: [String: String] = [:]) async throws -> TestNode {
        await reserveSlot()
        let joins = join ?? (nodes.first.map { [$0.addr] } ?? [])
        let node = try TestNode(name: name, dir: dir, key: key ?? self.key, keyArguments: keyArguments, join: joins, extra: extra, dataDir: dataDir,
                                environment: environment)
        nodes.append(node)
        try await node.ready()
        return node
    }

    /// Every running node sees `count` members alive and holds a link to each of the others (so
    /// their datagram keys are in place: unreliable sends reach them).
    func waitForFullMesh(_ count: Int) async throws {
        for node in nodes where node.process.isRunning {
            try await eventually("\(node.name) to see \(count) alive members") { try await node.aliveMembers() == count }
            try await eventually("\(node.name) to hold a link to each of the \(count - 1) others") {
                (try await node.request("stats")["links"]?.intValue ?? 0) >= Int64(count - 1)
            }
        }
    }

    /// SIGKILL to every node still running (teardown: nothing is checked any more, and leaving
    /// would only cost the other tests' nodes CPU). Returns at once: the wait runs off the test
    /// pool (`TestProcesses`), and the directory goes after it. A test that checks leaving sends
    /// SIGTERM or `leave` itself and waits for the exit.
    func shutdown() {
        if holdsSlot {
            holdsSlot = false
            Task { await ClusterSlots.shared.release() }
        }
        let dir = self.dir
        TestProcesses.end(nodes.map(\.process)) { try? FileManager.default.removeItem(atPath: dir) }
    }

    /// What every node logged, for failure messages.
    var logs: String { nodes.map { "--- \($0.name)\n\($0.log)" }.joined(separator: "\n") }
}

/// The integer at `path` in a reply (`field(stats, "bytes_sent", "messages")`). A figure the
/// reply does not hold fails the test (and reads as -1): a check such as `<= 0` or `== 0` must
/// not pass on a stat that was renamed or never reported.
func field(_ reply: JSONObject, _ path: String..., sourceLocation: SourceLocation = #_sourceLocation) -> Int64 {
    var value: JSON? = .object(reply)
    for key in path { value = value?.objectValue?[key] }
    guard let number = value?.intValue else {
        Issue.record("no integer at \(path.joined(separator: ".")) in the reply: \(reply.serializedForLog)", sourceLocation: sourceLocation)
        return -1
    }
    return number
}

/// Runs a request that must fail, and checks the node answered with one of `codes`.

func expectFailure(_ codes: ControlError.Code..., what: String, _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("\(what) was accepted")
    } catch let error as ControlError {
        #expect(codes.contains(error.code), "\(what): got \(error)")
    } catch {
        Issue.record("\(what): \(error)")
    }
}
