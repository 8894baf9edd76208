import Foundation
import Logging

/// swift-log's `LogHandler` for a node: one line per message on standard error, as
/// `<time> huddle[<name>] [<level>: ]<message>` (`info` and below carry no level word; metadata,
/// when any, follows as `key=value`). One `write` per line, so lines of concurrent tasks never interleave.
struct NodeLogHandler: LogHandler {
    let name: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let stamp = Date().formatted(.iso8601.time(includingFractionalSeconds: true))
        let levelWord = event.level > .info ? "\(event.level): " : ""
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let tail = merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let text = "\(stamp) huddle[\(name)] \(levelWord)\(event.message)\(tail)\n"
        _ = text.utf8CString.withUnsafeBufferPointer { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
    }

    /// The node's logger: its name in every line.
    static func logger(name: String) -> Logger {
        Logger(label: "huddle.node") { _ in NodeLogHandler(name: name) }
    }
}
