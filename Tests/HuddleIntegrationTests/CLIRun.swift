import Foundation
import HuddleTestSupport

/// What one run of the `huddle` executable printed, and its exit status.
struct CLIResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs `huddle ARGUMENTS` to its end (its output is a few lines: the pipes never fill).
func runCLI(_ arguments: [String]) async throws -> CLIResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: huddleBinary)
    process.arguments = arguments
    let out = TestProcesses.pipe(), err = TestProcesses.pipe()
    process.standardOutput = out
    process.standardError = err
    try TestProcesses.launch(process)
    let status = await process.exitStatus()
    return CLIResult(status: status,
                     stdout: String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
                     stderr: String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
}
