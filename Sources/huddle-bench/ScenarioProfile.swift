import Foundation
import Synchronization

/// The node processes started since the last `take()`: whose samples a `ScenarioProfile` keeps.
enum NodeProcesses {
    private static let pids = Mutex<[Int32]>([])

    static func note(_ pid: Int32) { pids.withLock { $0.append(pid) } }

    static func take() -> [Int32] { pids.withLock { p in defer { p = [] }; return p } }
}

/// Where the node processes spent their CPU during one scenario: `perf record` samples the whole
/// machine (software clock, 499 Hz a core, no call graphs, so the nodes barely notice it) while the
/// scenario runs, and `perf report` keeps the samples of the scenario's node processes alone.
///
/// Guarantees: never fails the scenario; when perf is missing or refuses, the summary says why.
struct ScenarioProfile {
    let name: String
    private let perf: Process?
    private let data: String
    private let problem: String?

    static var available: Bool { ["/usr/bin/perf", "/usr/bin/python3"].allSatisfy(FileManager.default.isExecutableFile(atPath:)) }

    /// Starts sampling; `dir` keeps the raw `perf.data` of each scenario for `perf report` later.
    init(name: String, dir: String) {
        self.name = name
        let slug = name.map { $0.isLetter || $0.isNumber ? $0 : "-" }
        data = "\(dir)/\(String(slug)).perf.data"
        _ = NodeProcesses.take()
        let p = Process()
        // A child of this process starts with the signals of the thread that spawned it blocked
        // (a concurrency thread), and perf must see SIGINT to stop and write its data: a one-line
        // Python wrapper unblocks them and becomes perf.
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])",
                       "/usr/bin/perf", "record", "-a", "-e", "cpu-clock", "-F", "499", "-q", "-o", data]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do {
            try p.run()
            perf = p
            problem = nil
        } catch {
            perf = nil
            problem = "perf did not start: \(error)"
        }
    }

    /// Stops sampling and returns the Markdown summary: the nodes' CPU by library (kernel, libsodium,
    /// the Swift runtime, huddle itself) and their busiest functions.
    func stop() -> String {
        let pids = NodeProcesses.take()
        var head = "### \(name)\n\n"
        guard let perf else { return head + "\(problem ?? "perf did not run")\n\n" }
        perf.interrupt()
        perf.waitUntilExit()
        guard !pids.isEmpty else { return head + "no node processes ran\n\n" }
        // `--sort dso` alone drops the kernel's samples under `--pid`: sum the functions instead.
        guard let rows = report(["--pid", pids.map(String.init).joined(separator: ","), "--percentage", "relative", "--sort", "dso,sym"]) else {
            return head + "perf report failed on \(data)\n\n"
        }
        var byLibrary: [String: Double] = [:]
        for row in rows { byLibrary[row.library, default: 0] += row.percent }
        let libraries = byLibrary.sorted { $0.value > $1.value }.prefix(6)
            .map { "\(fmt($0.value, 1))%  \($0.key)\n" }.joined()
        let functions = rows.prefix(16).map { "\(fmt($0.percent, 1))%  \($0.library)  \(String($0.function.prefix(130)))\n" }.joined()
        head += "Share of the scenario's node processes' CPU samples (`perf report -i \((data as NSString).lastPathComponent) --pid … --percentage relative --sort dso,sym`).\n\n"
        head += "by library:\n\n```\n\(libraries)```\n\nbusiest functions:\n\n```\n\(functions)```\n\n"
        return head
    }

    /// The report's rows, busiest first: percent, library, function.
    private func report(_ args: [String]) -> [(percent: Double, library: String, function: String)]? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/perf")
        p.arguments = ["report", "-i", data, "--stdio", "--no-children", "-q"] + args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return nil }
        let out = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { return nil }
        // "  12.34%  library  [.] function" (`[k]` for the kernel's).
        return String(decoding: out, as: UTF8.self).split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: true)
            guard parts.count == 4, parts[0].hasSuffix("%"), let percent = Double(parts[0].dropLast()) else { return nil }
            return (percent, String(parts[1]), String(parts[3]).trimmingCharacters(in: .whitespaces))
        }
    }
}
