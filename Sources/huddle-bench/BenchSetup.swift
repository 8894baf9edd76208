import Foundation

/// The benchmark's setup: the peers it compares against (Debian's `serf` and `python3-libtorrent`)
/// are installed by `scripts/deps.sh --bench` when missing. Installing needs root or sudo; without
/// them the affected comparisons are skipped and say so.
enum BenchSetup {
    /// The repository's root, found from this source file (huddle-bench runs from a clone).
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static var libtorrentAvailable: Bool {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return false }
        return run("/usr/bin/python3", ["-c", "import libtorrent"]) == 0
    }

    static func installPeersIfMissing() {
        guard !SerfCluster.available || !libtorrentAvailable else { return }
        let script = repository.appendingPathComponent("scripts/deps.sh").path
        guard FileManager.default.fileExists(atPath: script) else { return }
        print("huddle-bench: installing missing benchmark peers (scripts/deps.sh --bench)")
        _ = run("/bin/bash", [script, "--bench"], quiet: false)
    }

    @discardableResult
    private static func run(_ tool: String, _ arguments: [String], quiet: Bool = true) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = arguments
        if quiet {
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
        }
        do { try p.run() } catch { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }
}
