import Foundation
import Synchronization
import HuddleControl
import HuddleTestSupport

/// Nanoseconds of the wall clock (CLOCK_REALTIME): every process on this machine reads the same one.
func wallNanos() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

struct BenchError: Error, CustomStringConvertible { let description: String }

/// Polls `condition` until it holds or `seconds` pass.
/// Polls `condition` until it holds; a `BenchError` thrown by it ends the wait at once, other errors
/// count as "not yet".
func waitFor(_ what: String, seconds: Double = 60, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        do { if try await condition() { return } } catch let error as BenchError { throw error } catch {}
        try await Task.sleep(for: .milliseconds(20))
    }
    throw BenchError(description: "timed out waiting for \(what)")
}

/// Peak RSS (MiB) and CPU seconds of a process, read from /proc before it is stopped.
struct ProcessUsage {
    let peakRSSMiB: Double
    let cpuSeconds: Double

    init?(pid: Int32) {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kb = Double(line.split(separator: " ").dropFirst().first ?? ""),
              let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        let ticks = (Double(fields.count > 12 ? fields[11] : "0") ?? 0) + (Double(fields.count > 12 ? fields[12] : "0") ?? 0)
        peakRSSMiB = kb / 1024
        cpuSeconds = ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

/// Real `huddle run` processes on loopback, each with its own port, control socket and data
/// directory: `--data-dir` (the node keeps its membership there and can be restarted on it), or
/// with `dataDirectory: false` none (the node uses a temporary directory and persists nothing).
final class HuddleCluster {
    let binary: String
    let dir: String
    let key: String
    let dataDirectory: Bool
    private(set) var processes: [Process] = []
    private(set) var controls: [String] = []
    private(set) var addrs: [String] = []
    private(set) var members: [String] = []
    /// Each node's `huddle run` arguments after `--listen ADDR` (for `restart`).
    private var arguments: [[String]] = []

    /// Each node serves Prometheus metrics (`--metrics`) on this port (only with `metrics`).
    private(set) var metricsPorts: [Int] = []
    let metrics: Bool

    init(binary: String, label: String, dataDirectory: Bool = true, metrics: Bool = false) throws {
        self.binary = binary
        self.dataDirectory = dataDirectory
        self.metrics = metrics
        var template = Array("/tmp/hb-\(label)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw BenchError(description: "mkdtemp failed") }
        dir = String(cString: made)
        key = "\(dir)/k.key"
        let keygen = Process()
        keygen.executableURL = URL(fileURLWithPath: binary)
        keygen.arguments = ["keygen", "--out", key]
        keygen.standardOutput = FileHandle.nullDevice
        try keygen.run()
        keygen.waitUntilExit()
    }

    /// Starts `count` nodes (each joining the first) and waits until every node sees all of them.
    func start(_ count: Int) async throws {
        for _ in 0..<count { try await add() }
        try await waitFor("\(count) nodes to see each other") {
            for c in controls { if try await request(c, .status).status.members != Int64(controls.count) { return false } }
            return true
        }
    }

    /// Starts one more node, joined to node `joinVia`.
    func add(joinVia: Int = 0) async throws {
        let i = processes.count
        let control = "\(dir)/n\(i).sock"
        let rest = ["--name", "n\(i)", "--control", control] + (dataDirectory ? ["--data-dir", "\(dir)/d\(i)"] : [])
            + (addrs.indices.contains(joinVia) ? ["--join", addrs[joinVia]] : []) + (metrics ? ["--metrics", "127.0.0.1:0"] : [])
        processes.append(try launch(i, listen: "127.0.0.1:0", rest))
        controls.append(control)
        arguments.append(rest)
        let status = try await started(i)
        addrs.append(status.addr)
        members.append(status.member)
        if metrics { metricsPorts.append(try metricsPort(i)) }
    }

    /// The port node `i` serves metrics on, as its log says (`serving metrics at http://…/metrics`,
    /// logged before its control socket answers).
    private func metricsPort(_ i: Int) throws -> Int {
        let log = (try? String(contentsOfFile: "\(dir)/n\(i).log", encoding: .utf8)) ?? ""
        guard let line = log.split(separator: "\n").first(where: { $0.contains("serving metrics at http://") }),
              let url = line.split(separator: " ").first(where: { $0.hasPrefix("http://") }),
              let port = Int(url.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            throw BenchError(description: "node \(i) did not log its metrics address; see \(dir)/n\(i).log")
        }
        return port
    }

    /// Node `i`'s hop histograms (`huddle_message_hop_seconds`), by hop, and its commits' time on
    /// the I/O queue (`huddle_commit_seconds`) as "commit_io", scraped now.
    func hopHistograms(_ i: Int) async throws -> [String: HistogramBuckets] {
        let reply = try await httpGet(port: metricsPorts[i], "/metrics")
        var hops = HistogramBuckets.parse(reply.body, metric: "huddle_message_hop_seconds", label: "hop")
        hops["commit_io"] = HistogramBuckets.parse(reply.body, metric: "huddle_commit_seconds")[""]
        return hops
    }

    /// Starts node `i` again (after `kill`) with the same arguments and data directory, on the
    /// port it had (as a service restarted on a fixed port); returns once it answers `status`,
    /// with that reply. Its log goes on in the same file.
    func restart(_ i: Int) async throws -> ControlStatus {
        let port = addrs[i].split(separator: ":").last.map(String.init) ?? "0"
        processes[i] = try launch(i, listen: "127.0.0.1:\(port)", arguments[i])
        return try await started(i)
    }

    private func launch(_ i: Int, listen: String, _ rest: [String]) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["run", "--key", key, "--listen", listen] + rest
        let log = "\(dir)/n\(i).log"
        if !FileManager.default.fileExists(atPath: log) { FileManager.default.createFile(atPath: log, contents: nil) }
        let handle = FileHandle(forWritingAtPath: log)
        handle?.seekToEndOfFile()
        p.standardError = handle
        try p.run()
        NodeProcesses.note(p.processIdentifier)
        return p
    }

    /// Waits for node `i` to answer `status` (the socket file appears at bind(), a moment before
    /// the node accepts on it: retry); a node that exited ends the wait at once.
    private func started(_ i: Int) async throws -> ControlStatus {
        var status: ControlStatus?
        let (process, control) = (processes[i], controls[i])
        try await waitFor("node \(i) to start") {
            if !process.isRunning { throw BenchError(description: "node \(i) exited at start (status \(process.terminationStatus)); see \(self.dir)/n\(i).log") }
            status = try await self.request(control, .status).status
            return true
        }
        guard let status else { throw BenchError(description: "node \(i) did not answer status") }
        return status
    }

    func request(_ control: String, _ request: ControlRequest) async throws -> ControlResponse {
        try await Self.ask(control, request)
    }

    /// One request on a fresh connection to the node at `control`.
    static func ask(_ control: String, _ request: ControlRequest) async throws -> ControlResponse {
        let client = try await ControlClient.connect(path: control)
        let reply = try await client.request(request)
        await client.close()
        return reply
    }

    func usage() -> [ProcessUsage] { processes.filter(\.isRunning).compactMap { ProcessUsage(pid: $0.processIdentifier) } }

    func kill(_ i: Int) { Glibc.kill(processes[i].processIdentifier, SIGKILL) }

    /// Stops member `i` without closing anything (SIGSTOP): what a host that vanishes looks like.
    func freeze(_ i: Int) { Glibc.kill(processes[i].processIdentifier, SIGSTOP) }

    func stop() {
        ClusterMemory.note(usage())
        for p in processes where p.isRunning { Glibc.kill(p.processIdentifier, SIGKILL) }
        for p in processes { p.waitUntilExit() }
        if ProcessInfo.processInfo.environment["HUDDLE_BENCH_KEEP"] != nil {
            FileHandle.standardError.write(Data("huddle-bench: kept \(dir) (node logs n*.log)\n".utf8))
        } else {
            try? FileManager.default.removeItem(atPath: dir)
        }
    }
}

/// The first of `count` consecutive loopback ports, all free for TCP and UDP, in 20000–32000
/// (below Linux's default ephemeral range, 32768–60999).
func freePortBlock(count: Int) throws -> Int {
    for _ in 0..<200 {
        let base = Int.random(in: 20000...(32000 - count))
        if (base..<base + count).allSatisfy({ portIsFree($0, SOCK_STREAM) && portIsFree($0, SOCK_DGRAM) }) { return base }
    }
    throw BenchError(description: "no block of \(count) free loopback ports in 20000–32000")
}

private func portIsFree(_ port: Int, _ type: __socket_type) -> Bool {
    let fd = socket(AF_INET, Int32(type.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// Serf agents on loopback (the Debian package), with an event handler that stamps each event.
final class SerfCluster {
    let dir: String
    private(set) var processes: [Process] = []
    private(set) var rpc: [String] = []

    static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/serf") }

    init(label: String) throws {
        var template = Array("/tmp/hs-\(label)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw BenchError(description: "mkdtemp failed") }
        dir = String(cString: made)
        let handler = """
            #!/bin/sh
            now=$(date +%s%N)
            payload=$(cat | tr '\\n\\t' '  ')
            echo "$now $SERF_EVENT $SERF_USER_EVENT $payload" >> "$1"
            """
        try handler.write(toFile: "\(dir)/handler.sh", atomically: true, encoding: .utf8)
        chmod("\(dir)/handler.sh", 0o755)
    }

    /// Starts `count` agents on a block of free loopback ports below the kernel's ephemeral range
    /// (so no outgoing connection of another process can take one of them while the agents start).
    func start(_ count: Int) async throws {
        let key = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let basePort = try freePortBlock(count: 2 * count)
        for i in 0..<count {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/serf")
            p.arguments = ["agent", "-node=s\(i)", "-bind=127.0.0.1:\(basePort + 2 * i)", "-rpc-addr=127.0.0.1:\(basePort + 2 * i + 1)",
                           "-encrypt=\(key)", "-profile=lan", "-log-level=err", "-event-handler=\(dir)/handler.sh \(dir)/events-\(i)"]
                + (i > 0 ? ["-retry-join=127.0.0.1:\(basePort)", "-retry-interval=1s"] : [])
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            processes.append(p)
            rpc.append("127.0.0.1:\(basePort + 2 * i + 1)")
        }
        try await waitFor("\(count) serf agents to see each other") {
            if let dead = self.processes.firstIndex(where: { !$0.isRunning }) {
                throw BenchError(description: "serf agent \(dead) exited at start (status \(self.processes[dead].terminationStatus))")
            }
            return (try self.output(["members", "-rpc-addr=\(self.rpc[0])", "-status=alive"])).split(separator: "\n").count == count
        }
    }

    func output(_ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/serf")
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// Event lines one agent's handler wrote: `nanos event userEvent payload…`.
    func events(_ i: Int) -> [String] {
        ((try? String(contentsOfFile: "\(dir)/events-\(i)", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func kill(_ i: Int) { Glibc.kill(processes[i].processIdentifier, SIGKILL) }

    func stop() {
        for p in processes where p.isRunning { Glibc.kill(p.processIdentifier, SIGKILL) }
        for p in processes { p.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// Peak RSS of the huddle nodes of every cluster stopped since the last `take()`: what each
/// scenario row shows in its memory column (nodes killed during a scenario are not counted).
enum ClusterMemory {
    private static let peaks = Mutex<[Double]>([])

    static func note(_ usage: [ProcessUsage]) { peaks.withLock { $0 += usage.map(\.peakRSSMiB) } }

    /// "max M MiB [a/b/…]" for the nodes noted since the last call, or nil when none were.
    static func take() -> String? {
        let all = peaks.withLock { p in defer { p = [] }; return p }
        guard let top = all.max() else { return nil }
        return "max \(fmt(top, 0)) MiB [\(all.map { fmt($0, 0) }.joined(separator: "/"))]"
    }
}
