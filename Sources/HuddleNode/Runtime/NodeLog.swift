import Foundation

/// One-line log messages on standard error, prefixed with the node's name.
struct NodeLog: Sendable {
    let name: String

    func info(_ message: String) { write("\(message)") }
    func warning(_ message: String) { write("warning: \(message)") }

    private func write(_ line: String) {
        let stamp = Date().formatted(.iso8601.time(includingFractionalSeconds: true))
        FileHandle.standardError.write(Data("\(stamp) huddle[\(name)] \(line)\n".utf8))
    }
}
