import Foundation
import HuddleTestSupport

/// A real Prometheus server (Debian's `prometheus`) for a test: its own configuration, storage
/// directory and web port on loopback, scraping the given targets every second; and `promtool`.
/// Absent binaries are an error naming how to get them (`make test` installs them).
final class PrometheusServer: @unchecked Sendable {
    // @unchecked: `process` and `port` are set once in `start` before the server is shared, and
    // `Process` itself is thread-safe for the calls made here (isRunning, processIdentifier).
    let process: Process
    let port: Int
    let logPath: String

    private init(process: Process, port: Int, logPath: String) {
        self.process = process
        self.port = port
        self.logPath = logPath
    }

    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    /// The path of `name` on `$PATH`, or an error saying how to install it.
    static func tool(_ name: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") + ["/usr/bin"] where FileManager.default.isExecutableFile(atPath: "\(dir)/\(name)") {
            return "\(dir)/\(name)"
        }
        throw Missing(description: "\(name) is not installed: `make test` installs Debian's prometheus package (scripts/deps.sh), or run `apt-get install prometheus`")
    }

    /// Starts Prometheus in `dir` scraping `targets` (`host:port`, path /metrics) every second, and
    /// waits until it is ready. A web port another process took meanwhile is retried with another.
    static func start(in dir: String, targets: [String]) async throws -> PrometheusServer {
        let binary = try tool("prometheus")
        let config = "\(dir)/prometheus.yml"
        let list = targets.map { "'\($0)'" }.joined(separator: ", ")
        try """
            global:
              scrape_interval: 1s
              scrape_timeout: 1s
              evaluation_interval: 1s
            scrape_configs:
              - job_name: huddle
                metrics_path: /metrics
                static_configs:
                  - targets: [\(list)]
            """.write(toFile: config, atomically: true, encoding: .utf8)
        var lastLog = ""
        for attempt in 1...3 {
            let port = try freeLoopbackPort()
            let logPath = "\(dir)/prometheus-\(attempt).log"
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["--config.file=\(config)", "--storage.tsdb.path=\(dir)/prometheus-data-\(attempt)",
                                 "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle(forWritingAtPath: logPath)
            try TestProcesses.launch(process)
            let server = PrometheusServer(process: process, port: port, logPath: logPath)
            do {
                try await eventually("prometheus to be ready on 127.0.0.1:\(port)", within: 60) {
                    guard process.isRunning else { throw Missing(description: "prometheus exited: \(server.log)") }
                    return try await httpGet(port: port, "/-/ready").status == 200
                }
                return server
            } catch {
                lastLog = server.log
                server.stop()
                guard !process.isRunning, lastLog.contains("address already in use") else { throw error }
            }
        }
        throw Missing(description: "prometheus could not listen on a free port in 3 tries: \(lastLog)")
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// One instant query (`/api/v1/query`): each series' labels and value.
    func query(_ promQL: String) async throws -> [(labels: [String: String], value: Double)] {
        let encoded = promQL.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? promQL
        let reply = try await httpGet(port: port, "/api/v1/query?query=\(encoded)")
        guard reply.status == 200,
              let object = try JSONSerialization.jsonObject(with: Data(reply.body.utf8)) as? [String: Any],
              object["status"] as? String == "success",
              let data = object["data"] as? [String: Any], let result = data["result"] as? [[String: Any]] else {
            throw Missing(description: "prometheus answered \(reply.status) to \(promQL): \(reply.body)")
        }
        return result.map { series in
            let labels = series["metric"] as? [String: String] ?? [:]
            let value = (series["value"] as? [Any])?.last.flatMap { $0 as? String }.flatMap(Double.init) ?? .nan
            return (labels, value)
        }
    }

    /// SIGKILL (teardown; nothing is checked any more); the wait runs off the test pool.
    func stop() { TestProcesses.end([process]) }
}

/// A TCP port on 127.0.0.1 free a moment ago (bound to port 0, then closed).
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestTimeout(description: "socket: errno \(errno)") }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &addr) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw TestTimeout(description: "bind 127.0.0.1:0: errno \(errno)") }
    return Int(UInt16(bigEndian: addr.sin_port))
}

