import Foundation
import HuddleTestSupport

/// Runs short administrative commands (`ip`, `nft`, `kill`) synchronously and returns what they said.
enum Shell {
    struct Result {
        let status: Int32
        let output: String
        var ok: Bool { status == 0 }
    }

    struct Failure: Error, CustomStringConvertible {
        let command: [String]
        let result: Result
        var description: String {
            "`\(command.joined(separator: " "))` exited \(result.status): \(result.output.trimmingCharacters(in: .whitespacesAndNewlines))"
        }
    }

    /// `ip` and `nft` live in /usr/sbin or /sbin; PATH may not include them when tests run.
    static func locate(_ tool: String) -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for dir in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
            let candidate = "\(dir)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return tool
    }

    static let ip = locate("ip")
    static let nft = locate("nft")

    /// Runs `command` (its first element an absolute path), feeding `input` on stdin.
    @discardableResult
    static func run(_ command: [String], input: String? = nil) -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let out = TestProcesses.pipe()
        process.standardOutput = out
        process.standardError = out
        let stdin = TestProcesses.pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : stdin
        do { try TestProcesses.launch(process) } catch {
            return Result(status: 127, output: "cannot run \(command[0]): \(error)")
        }
        if let input {
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try? stdin.fileHandleForWriting.close()
        }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }

    /// Runs `command` and throws when it fails.
    @discardableResult
    static func must(_ command: [String], input: String? = nil) throws -> String {
        let result = run(command, input: input)
        guard result.ok else { throw Failure(command: command, result: result) }
        return result.output
    }

    static func isAlive(_ pid: Int32) -> Bool {
        pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }
}
