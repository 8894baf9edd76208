import ArgumentParser
import Foundation
import HuddleControl

struct AttachCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attach",
        abstract: "Share files with the session: every member fetches them, any member serves them.",
        subcommands: [AttachAdd.self, AttachList.self, AttachGet.self, AttachRemove.self]
    )
}

/// A one-line summary of an attachment object.
func describeAttachment(_ a: JSONObject?) -> String {
    guard let a else { return "-" }
    return "\(plain(a["id"]))  \(plain(a["name"]))  \(plain(a["size"])) B  \(plain(a["have"]))/\(plain(a["chunks"])) chunks  \(plain(a["state"]))"
}

struct AttachAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a file (up to 100 MiB) to the session's journal.")
    @Argument(help: "The file to share.") var file: String
    @Option(name: .long, help: "Name shown to members (default: the file name).") var name: String?
    @Option(name: .long, help: "Metadata as JSON (at most 16 KiB), e.g. '{\"location\":[10,20]}'.") var meta: String?
    @OptionGroup var options: ControlOptions

    func run() async throws {
        var fields: JSONObject = ["path": .string(URL(fileURLWithPath: file).standardizedFileURL.path)]
        if let name { fields["name"] = .string(name) }
        if let meta {
            guard let value = try? JSON.parse(meta) else { throw ValidationError("--meta is not valid JSON") }
            fields["meta"] = value
        }
        try await options.perform("attach.add", fields) { reply in print(describeAttachment(reply["attachment"]?.objectValue)) }
    }
}

struct AttachList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the session's attachments as this node sees them.")
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform("attach.list") { reply in
            for a in reply["attachments"]?.arrayValue ?? [] { print(describeAttachment(a.objectValue)) }
        }
    }
}

struct AttachGet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write an attachment to OUT once this node has it (a progress bar on a terminal).",
        discussion: "Fails at once with 'unavailable' when some chunk has no live holder."
    )
    @Argument(help: "Attachment id.") var id: String
    @Argument(help: "Output file.") var out: String
    @Flag(name: .customLong("no-wait"), help: "Fail instead of waiting when the attachment is not complete here.") var noWait = false
    @Option(name: .customLong("timeout-ms"), help: "Give up after this long.") var timeoutMs: Int?
    @Option(name: .customLong("mode"), help: "Permission bits of OUT in octal, e.g. 644 (default 600: readable by you only).") var mode: String?
    @OptionGroup var options: ControlOptions

    func run() async throws {
        var fields: JSONObject = ["id": .string(id), "path": .string(URL(fileURLWithPath: out).standardizedFileURL.path), "wait": .bool(!noWait)]
        if let timeoutMs { fields["timeout_ms"] = .int(Int64(timeoutMs)) }
        if let mode { fields["mode"] = .string(mode) }
        let progress = isatty(STDERR_FILENO) == 1 && !options.json ? Task { await showProgress(id: id, path: options.path) } : nil
        defer { progress?.cancel() }
        try await options.perform("attach.get", fields) { reply in
            progress?.cancel()
            if isatty(STDERR_FILENO) == 1 { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            print("wrote \(plain(reply["path"])): \(describeAttachment(reply["attachment"]?.objectValue))")
        }
    }

    /// Draws `[#####     ] 42%` on standard error from the node's attachment events.
    private func showProgress(id: String, path: String) async {
        guard let client = try? await ControlClient.connect(path: path),
              let _ = try? await client.request("subscribe", ["topics": ["attachments"]]) else { return }
        if let first = try? await client.request("attach.list"),
           let a = first["attachments"]?.arrayValue?.compactMap(\.objectValue).first(where: { $0["id"]?.stringValue == id }) {
            draw(a)
        }
        do {
            for try await event in await client.events() {
                guard let a = event["attachment"]?.objectValue, a["id"]?.stringValue == id else { continue }
                draw(a)
            }
        } catch {}
        await client.close()
    }

    private func draw(_ a: JSONObject) {
        let have = Double(a["have"]?.intValue ?? 0), total = Double(max(a["chunks"]?.intValue ?? 1, 1))
        let width = 30, filled = Int(Double(width) * have / total)
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        FileHandle.standardError.write(Data("\r[\(bar)] \(Int(100 * have / total))%  \(plain(a["name"]))".utf8))
    }
}

struct AttachRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an attachment from the session; every member deletes its chunks.")
    @Argument(help: "Attachment id.") var id: String
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform("attach.remove", ["id": .string(id)]) { _ in print("removed \(id)") }
    }
}

struct ActivityCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activity",
        abstract: "Read or set the session's activity: one JSON value every member converges on.",
        subcommands: [ActivityGet.self, ActivitySet.self]
    )
}

struct ActivityGet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Print the current activity and who set it.")
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform("activity.get") { reply in print("\(plain(reply["activity"]))  (set by \(plain(reply["set_by"])))") }
    }
}

struct ActivitySet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set", abstract: "Set the activity to a JSON value (at most 16 KiB).")
    @Argument(help: "The value, as JSON (e.g. '{\"canvas\":2}').") var value: String
    @OptionGroup var options: ControlOptions

    func run() async throws {
        guard let json = try? JSON.parse(value) else { throw ValidationError("the value is not valid JSON") }
        try await options.perform("activity.set", ["value": json]) { _ in print("activity set") }
    }
}
