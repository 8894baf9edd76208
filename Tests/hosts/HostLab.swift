import Foundation
import HuddleTestSupport
#if canImport(Glibc)
import Glibc
#endif
import HuddleControl
import HuddleCrypto

/// Where the `huddle` executable under test is (`BuiltExecutables`).
let huddleBinary = BuiltExecutables.path("huddle")

/// Every name this process creates starts with `hhost-<pid>-`, so a later run can tell which
/// leftovers belong to a process that is gone.
let labPrefix = "hhost-"

struct LabError: Error, CustomStringConvertible {
    let description: String
}

/// Teardown actions of every live lab, run by the lab itself (defer) or, when the test process is
/// interrupted by SIGINT/SIGTERM/SIGHUP, by the signal handler before the process dies.
final class CleanupRegistry: @unchecked Sendable {
    // @unchecked: every field is guarded by `lock`.
    static let shared = CleanupRegistry()
    private let lock = NSLock()
    private var actions: [Int: @Sendable () -> Void] = [:]
    private var next = 0
    private var sources: [DispatchSourceSignal] = []
    private var installed = false

    func add(_ action: @escaping @Sendable () -> Void) -> Int {
        lock.lock(); defer { lock.unlock() }
        installSignalHandlersLocked()
        next += 1
        actions[next] = action
        return next
    }

    func remove(_ token: Int) {
        lock.lock(); defer { lock.unlock() }
        actions[token] = nil
    }

    func runAll() {
        lock.lock()
        let all = actions.sorted { $0.key > $1.key }.map(\.value)
        actions = [:]
        lock.unlock()
        for action in all { action() }
    }

    private func installSignalHandlersLocked() {
        guard !installed else { return }
        installed = true
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                FileHandle.standardError.write(Data("hosts: signal \(sig): removing host namespaces and nodes before exiting\n".utf8))
                CleanupRegistry.shared.runAll()
                signal(sig, SIG_DFL)
                raise(sig)
            }
            source.resume()
            sources.append(source)
        }
    }
}

/// Whether this machine lets the suite create network namespaces (root, `ip netns`, `nft`).
enum HostEnvironment {
    /// nil when usable, else why not.
    static let unusableReason: String? = {
        if geteuid() != 0 { return "not running as root (euid \(geteuid())); network namespaces need root" }
        let probe = "\(labPrefix)\(getpid())-probe"
        _ = Shell.run([Shell.ip, "netns", "del", probe])
        let add = Shell.run([Shell.ip, "netns", "add", probe])
        guard add.ok else { return "`ip netns add` failed: \(add.output.trimmingCharacters(in: .whitespacesAndNewlines))" }
        defer { Shell.run([Shell.ip, "netns", "del", probe]) }
        let nft = Shell.run([Shell.ip, "netns", "exec", probe, Shell.nft, "list", "tables"])
        guard nft.ok else { return "`nft` does not work inside a namespace: \(nft.output.trimmingCharacters(in: .whitespacesAndNewlines))" }
        guard FileManager.default.isExecutableFile(atPath: huddleBinary) else {
            return "no huddle binary at \(huddleBinary) (build it, or set HUDDLE_BIN)"
        }
        return nil
    }()

    static var usable: Bool { unusableReason == nil }
    static var skipRequested: Bool { ProcessInfo.processInfo.environment["HUDDLE_SKIP_HOSTS"] == "1" }

    /// Removes namespaces (and the processes inside them) and directories that earlier runs of
    /// this suite left behind: anything named `hhost-<pid>-…` whose pid is no longer running.
    static let sweptLeftovers: Int = {
        var removed = 0
        let mine = getpid()
        func ownerGone(_ name: String) -> Bool {
            guard name.hasPrefix(labPrefix) else { return false }
            let rest = name.dropFirst(labPrefix.count)
            guard let pid = Int32(rest.prefix { $0.isNumber }), pid != mine else { return false }
            return !Shell.isAlive(pid)
        }
        let list = Shell.run([Shell.ip, "netns", "list"]).output
        for line in list.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            guard ownerGone(name) else { continue }
            removeNamespace(name)
            removed += 1
        }
        let tmp = NSTemporaryDirectory()
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? [] where ownerGone(entry) {
            try? FileManager.default.removeItem(atPath: (tmp as NSString).appendingPathComponent(entry))
            removed += 1
        }
        return removed
    }()

    /// Kills whatever still runs inside namespace `name`, then deletes it (its veths, bridge and
    /// nft tables go with it).
    static func removeNamespace(_ name: String) {
        let pids = Shell.run([Shell.ip, "netns", "pids", name]).output
        for pid in pids.split(whereSeparator: \.isWhitespace).compactMap({ Int32($0) }) { kill(pid, SIGKILL) }
        Shell.run([Shell.ip, "netns", "del", name])
    }
}

private let runCounter = NSLock()
nonisolated(unsafe) private var runsSoFar = 0

/// One emulated host: a network namespace with one address on the lab's bridge.
struct Host: Sendable {
    let index: Int
    let name: String
    let namespace: String
    let ip: String
    let interface: String
    var addr: String { "\(ip):7400" }
    /// The router this host sits behind (`.public`: none, it is on the lab's bridge; NATLab.swift).
    var router: Router = .public
    /// The router's address on the bridge (what members see a NATted host's traffic come from).
    var wan: String?
    /// Whether the router forwards the WAN's port 7400 (TCP and UDP) to this host (a port forward:
    /// an nft DNAT, `NATLab.swift`); the node then advertises `reachableAddr`.
    var forwarded = false
    /// Where other hosts reach this one: its forwarded port on the router, else its own address.
    var reachableAddr: String { forwarded ? "\(wan ?? ip):7400" : addr }
}

/// A private network of namespace hosts for one test: a switch namespace holding a bridge, one
/// namespace per host joined to it by a veth pair, one session key, and the nodes started on the
/// hosts. Everything it makes is named after this process's pid and a per-process counter, and
/// `teardown` (idempotent; also run on SIGINT/SIGTERM) removes all of it.
final class HostLab: @unchecked Sendable {
    // @unchecked: `nodes` is appended to only by the test's own task; `torn` is guarded by `lock`.
    let tag: String
    let dir: String
    let key: String
    let hosts: [Host]
    private let switchNamespace: String
    private(set) var nodes: [HostNode] = []
    private let lock = NSLock()
    private var torn = false
    private var namespaces: [String] = []
    private var cleanupToken = 0

    /// `routers[i]`, when given and not `.public`: host `i` sits behind a NAT router of that kind (NATLab.swift).
    /// `forwarded`: hosts behind a router whose router forwards port 7400 to them.
    init(_ label: String, hosts count: Int, routers: [Router] = [], forwarded: Set<Int> = []) throws {
        precondition((1...250).contains(count))
        _ = HostEnvironment.sweptLeftovers
        runCounter.lock()
        runsSoFar += 1
        let run = runsSoFar
        runCounter.unlock()
        let pid = Int(getpid())
        let tag = "\(labPrefix)\(pid)-\(run)"
        self.tag = tag
        // Interface names (≤ 15 bytes) from the pid and counter in base 36: "hb2ihcgx3" at most 10.
        let short = "\(String(pid, radix: 36))x\(String(run, radix: 36))"
        // 10.x.y.0/24, distinct for each (pid, run) pair on one machine in practice; the bridges are
        // private to this lab anyway, so even a clash would not connect two labs.
        let subnet = (pid &* 64 &+ run) % 65_536
        let prefix = "10.\(subnet / 256).\(subnet % 256)"
        var template = Array("/tmp/\(tag)-\(label.prefix(10))-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw LabError(description: "mkdtemp failed") }
        dir = String(cString: made)
        key = "\(dir)/session.key"
        switchNamespace = "\(tag)-sw"
        hosts = (0..<count).map { i in
            let name = String(UnicodeScalar(UInt8(97 + i % 26))) + (i >= 26 ? "\(i / 26)" : "")
            let router = i < routers.count ? routers[i] : .public
            guard router != .public else {
                return Host(index: i, name: name, namespace: "\(tag)-\(name)", ip: "\(prefix).\(i + 1)", interface: "he\(short)i\(i)")
            }
            return Host(index: i, name: name, namespace: "\(tag)-\(name)", ip: Self.lanAddress(i, host: true), interface: "he\(short)i\(i)",
                        router: router, wan: "\(prefix).\(i + 101)", forwarded: forwarded.contains(i))
        }
        do {
            cleanupToken = CleanupRegistry.shared.add { [weak self] in self?.teardown() }
            try SessionKey.generate().write(to: key)
            try buildNetwork(bridge: "hb\(short)", short: short, prefix: prefix)
        } catch {
            teardown()
            throw error
        }
    }

    func addNamespace(_ name: String) throws {
        lock.lock(); namespaces.append(name); lock.unlock()
        try Shell.must([Shell.ip, "netns", "add", name])
        try Shell.must([Shell.ip, "-n", name, "link", "set", "lo", "up"])
    }

    private func buildNetwork(bridge: String, short: String, prefix: String) throws {
        try addNamespace(switchNamespace)
        try Shell.must([Shell.ip, "-n", switchNamespace, "link", "add", bridge, "type", "bridge"])
        try Shell.must([Shell.ip, "-n", switchNamespace, "link", "set", bridge, "up"])
        for host in hosts {
            try addNamespace(host.namespace)
            if host.router != .public {
                try buildRouter(for: host, bridge: bridge, switchNamespace: switchNamespace, short: short)
                continue
            }
            let port = "hs\(short)p\(host.index)"
            // Both ends are created straight inside the lab's namespaces: nothing appears in the root one.
            try Shell.must([Shell.ip, "link", "add", host.interface, "netns", host.namespace, "type", "veth",
                            "peer", "name", port, "netns", switchNamespace])
            try Shell.must([Shell.ip, "-n", switchNamespace, "link", "set", port, "master", bridge])
            try Shell.must([Shell.ip, "-n", switchNamespace, "link", "set", port, "up"])
            try Shell.must([Shell.ip, "-n", host.namespace, "addr", "add", "\(host.ip)/24", "dev", host.interface])
            try Shell.must([Shell.ip, "-n", host.namespace, "link", "set", host.interface, "up"])
        }
    }

    /// Starts `huddle run` inside host `i`'s namespace, joining through the given hosts' addresses.
    @discardableResult
    /// `environment`: variables added to the node's (test-only knobs such as `HUDDLE_TEST_RELAY_CORRUPT_AFTER`);
    /// `arguments`: more `huddle run` options (such as `--relay-limit`).
    func start(_ i: Int, join: [Int] = [], environment: [String: String] = [:], arguments: [String] = []) async throws -> HostNode {
        let node = try HostNode(host: hosts[i], dir: dir, key: key, join: join.map { hosts[$0].reachableAddr }, environment: environment, arguments: arguments)
        nodes.append(node)
        try await node.ready()
        return node
    }

    /// Starts a node on every host (or the first `count`), each joining the first, and waits until
    /// each sees all of them.
    func startAll(count: Int? = nil) async throws -> [HostNode] {
        var started: [HostNode] = []
        for host in hosts.prefix(count ?? hosts.count) { started.append(try await start(host.index, join: host.index == 0 ? [] : [0])) }
        try await waitForOneView(started)
        return started
    }

    /// Waits until every node in `nodes` lists exactly `nodes` as its alive members.
    @discardableResult
    func waitForOneView(_ nodes: [HostNode], within seconds: Double = 60) async throws -> Double {
        let start = ContinuousClock.now
        let want = Set(nodes.map(\.member))
        try await eventually("\(nodes.count) nodes to share one view", within: seconds) {
            for node in nodes where try await node.aliveMembers() != want { return false }
            return true
        }
        return (ContinuousClock.now - start).seconds
    }

    // MARK: faults

    private func nft(_ host: Int, _ script: String) throws {
        try Shell.must([Shell.ip, "netns", "exec", hosts[host].namespace, Shell.nft, "-f", "-"], input: script)
    }

    /// Drops `percent` % of packets at random, in and out, on host `i`'s interface.
    func loss(_ i: Int, percent: Int) throws {
        let iface = hosts[i].interface
        try nft(i, """
            table inet hhloss {
              chain in { type filter hook input priority -10; policy accept; iifname "\(iface)" numgen random mod 100 < \(percent) drop; }
              chain out { type filter hook output priority -10; policy accept; oifname "\(iface)" numgen random mod 100 < \(percent) drop; }
            }
            """)
    }

    /// Removes host `i`'s random loss (`loss(_:percent:)`).
    func clearLoss(_ i: Int) throws {
        try Shell.must([Shell.ip, "netns", "exec", hosts[i].namespace, Shell.nft, "delete", "table", "inet", "hhloss"])
    }

    /// Cuts every packet between the two groups, both ways, on every host of both.
    func partition(_ left: [Int], _ right: [Int]) throws {
        for (mine, theirs) in [(left, right), (right, left)] {
            let set = theirs.map { hosts[$0].ip }.joined(separator: ", ")
            for i in mine {
                try nft(i, """
                    table inet hhpart {
                      chain in { type filter hook input priority -20; policy accept; ip saddr { \(set) } drop; }
                      chain out { type filter hook output priority -20; policy accept; ip daddr { \(set) } drop; }
                    }
                    """)
            }
        }
    }

    /// Drops every TCP packet longer than `bytes` that host `i` sends: small messages (a journal
    /// entry) still leave, chunk bodies do not.
    func dropLargeTCP(from i: Int, over bytes: Int) throws {
        try nft(i, """
            table inet hhbig {
              chain out { type filter hook output priority -30; policy accept; meta l4proto tcp ip length > \(bytes) drop; }
            }
            """)
    }

    /// A file of `bytes` random bytes in the lab's directory (readable by every node).
    func randomFile(_ name: String, bytes: Int) throws -> String {
        let path = "\(dir)/\(name)"
        try writeRandomFile(path, count: bytes, seed: UInt64.random(in: .min ... .max))
        return path
    }

    /// Removes every partition rule.
    func heal() throws {
        for host in hosts {
            let r = Shell.run([Shell.ip, "netns", "exec", host.namespace, Shell.nft, "delete", "table", "inet", "hhpart"])
            if !r.ok && !r.output.contains("No such file") { throw LabError(description: "heal on \(host.name): \(r.output)") }
        }
    }

    // MARK: teardown

    /// Kills every node, deletes every namespace (with the veths, bridge and nft tables inside)
    /// and the lab's directory. Safe to call more than once and from the signal handler.
    func teardown() {
        lock.lock()
        if torn { lock.unlock(); return }
        torn = true
        let made = namespaces
        lock.unlock()
        for node in nodes { node.kill() }
        for node in nodes { node.waitUntilGone() }
        for ns in made.reversed() { HostEnvironment.removeNamespace(ns) }
        // HUDDLE_LAB_LOGS=<dir>: each node's log is kept there (as <lab tag>-<host>.log) for a
        // look at the timeline after the run.
        if let keep = ProcessInfo.processInfo.environment["HUDDLE_LAB_LOGS"], !keep.isEmpty {
            try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            for node in nodes { try? FileManager.default.copyItem(atPath: node.logPath, toPath: "\(keep)/\(tag)-\(node.name).log") }
        }
        try? FileManager.default.removeItem(atPath: dir)
        CleanupRegistry.shared.remove(cleanupToken)
    }

    /// What every node logged, for failure messages.
    var logs: String { nodes.map { "--- \($0.name)\n\($0.log.suffix(4000))" }.joined(separator: "\n") }
}

/// A `huddle run` process inside one host's namespace, with its own control socket and data dir.
final class HostNode: @unchecked Sendable {
    // @unchecked: set once in init/ready by the test's task; `Process` is thread-safe for the calls made.
    let host: Host
    let control: String
    let process: Process
    let logPath: String
    private(set) var member = ""
    var name: String { host.name }
    var pid: Int32 { process.processIdentifier }

    init(host: Host, dir: String, key: String, join: [String], environment: [String: String] = [:], arguments: [String] = []) throws {
        self.host = host
        control = "\(dir)/\(host.name).sock"
        logPath = "\(dir)/\(host.name).log"
        process = Process()
        // `ip netns exec` enters the namespace and execs the command, so the pid is the node's.
        process.executableURL = URL(fileURLWithPath: Shell.ip)
        process.arguments = ["netns", "exec", host.namespace, huddleBinary, "run", "--key", key,
                             "--listen", host.addr, "--name", host.name, "--control", control,
                             "--data-dir", "\(dir)/\(host.name).data"] + join.flatMap { ["--join", $0] }
            + (host.forwarded ? ["--advertise", host.reachableAddr] : []) + arguments
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new } }
        try TestProcesses.launch(process)
    }

    func ready() async throws {
        try await eventually("\(name)'s control socket", within: 30) {
            guard process.isRunning else { throw LabError(description: "\(name) exited: \(log)") }
            return FileManager.default.fileExists(atPath: control)
        }
        try await eventually("\(name) to answer status", within: 30) {
            member = try await request("status")["member"]?.stringValue ?? ""
            return !member.isEmpty
        }
    }

    func client() async throws -> ControlClient { try await ControlClient.connect(path: control) }

    /// One request on a fresh connection.
    func request(_ op: String, _ fields: JSONObject = [:]) async throws -> JSONObject {
        let c = try await client()
        do {
            let reply = try await c.ask(op, fields)
            await c.close()
            return reply
        } catch {
            await c.close()
            throw error
        }
    }

    /// The member ids this node lists as alive (itself included).
    func aliveMembers() async throws -> Set<String> {
        let list = try await request("members")["members"]?.arrayValue ?? []
        return Set(list.compactMap { m -> String? in
            guard let o = m.objectValue, o["state"]?.stringValue == "alive" else { return nil }
            return o["member"]?.stringValue
        })
    }

    /// This node's state for `member` in its `members` list (nil when it does not list it).
    func state(of member: String) async throws -> String? {
        let list = try await request("members")["members"]?.arrayValue ?? []
        return list.compactMap(\.objectValue).first { $0["member"]?.stringValue == member }?["state"]?.stringValue
    }

    func pause() { Glibc.kill(pid, SIGSTOP) }
    func resume() { Glibc.kill(pid, SIGCONT) }
    /// `kill -9`: the crash fault, and what teardown does.
    func kill() { if process.isRunning { Glibc.kill(pid, SIGKILL) } }

    func waitUntilGone() {
        guard process.processIdentifier > 0 else { return }
        process.waitUntilExit()
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
}

extension Duration {
    var seconds: Double { self / .seconds(1) }
}

/// Polls `condition` until it holds or `seconds` pass (generous: the machine is small and shared).
func eventually(_ what: String, within seconds: Double = 30, every interval: Duration = .milliseconds(100),
                _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if (try? await condition()) == true { return }
        try await Task.sleep(for: interval)
    }
    if try await condition() { return }
    throw LabError(description: "timed out after \(Int(seconds)) s waiting for: \(what)")
}
