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

/// A one-line summary of an attachment.
func describeAttachment(_ a: ControlAttachment?) -> String {
    guard let a else { return "-" }
    return "\(a.id)  \(a.name)  \(a.size) B  \(a.have)/\(a.chunks) chunks  \(a.state)"
}

struct AttachAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a file (up to 100 MiB) to the session's journal.")
    @Argument(help: "The file to share.") var file: String
    @Option(name: .long, help: "Name shown to members (default: the file name).") var name: String?
    @Option(name: .long, help: "Metadata as JSON (at most 16 KiB), e.g. '{\"location\":[10,20]}'.") var meta: String?
    @OptionGroup var options: ControlOptions

    func run() async throws {
        var value = JSON.null
        if let meta {
            guard let parsed = try? JSON.parse(meta) else { throw ValidationError("--meta is not valid JSON") }
            value = parsed
        }
        try await options.perform(.attachAdd(path: URL(fileURLWithPath: file).standardizedFileURL.path, name: name, meta: value)) { response in
            print(describeAttachment(try response.attachment))
        }
    }
}

struct AttachList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the session's attachments as this node sees them.")
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform(.attachList) { response in
            for a in try response.attachments { print(describeAttachment(a)) }
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
        let path = URL(fileURLWithPath: out).standardizedFileURL.path
        let progress = isatty(STDERR_FILENO) == 1 && !options.json ? Task { await showProgress(id: id, path: options.path) } : nil
        defer { progress?.cancel() }
        // The mode is checked as the node checks it (the same refusal when it is not octal bits).
        let request = { () throws(ControlError) -> ControlRequest in
            var bits: Int?
            if let mode { bits = try ControlRequest.permissionBits(.string(mode)) }
            return .attachGet(id: id, path: path, wait: !noWait, timeoutMs: timeoutMs.map(Int64.init), mode: bits)
        }
        try await options.perform(request) { response in
            progress?.cancel()
            if isatty(STDERR_FILENO) == 1 { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            guard case let .written(attachment, written) = response.result else { return }
            print("wrote \(written): \(describeAttachment(attachment))")
        }
    }

    /// Draws `[#####     ] 42%` on standard error from the node's attachment events.
    private func showProgress(id: String, path: String) async {
        guard let client = try? await ControlClient.connect(path: path),
              let _ = try? await client.request(.subscribe(topics: [.attachments], since: nil)) else { return }
        if let a = try? await client.request(.attachList).attachments.first(where: { $0.id == id }) {
            draw(a)
        }
        do {
            for try await event in await client.events() {
                guard let o = event["attachment"]?.objectValue, let a = try? ControlAttachment(o), a.id == id else { continue }
                draw(a)
            }
        } catch {}
        await client.close()
    }

    private func draw(_ a: ControlAttachment) {
        let have = Double(a.have), total = Double(max(a.chunks, 1))
        let width = 30, filled = min(max(Int(Double(width) * have / total), 0), width)
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        FileHandle.standardError.write(Data("\r[\(bar)] \(Int(100 * have / total))%  \(a.name)".utf8))
    }
}

struct AttachRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an attachment from the session; every member deletes its chunks.")
    @Argument(help: "Attachment id.") var id: String
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform(.attachRemove(id: id)) { _ in print("removed \(id)") }
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
        try await options.perform(.activityGet) { response in
            let activity = try response.activity
            print("\(plain(activity.value))  (set by \(plain(activity.setBy.map(JSON.string) ?? .null)))")
        }
    }
}

struct ActivitySet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set", abstract: "Set the activity to a JSON value (at most 16 KiB).")
    @Argument(help: "The value, as JSON (e.g. '{\"canvas\":2}').") var value: String
    @OptionGroup var options: ControlOptions

    func run() async throws {
        guard let json = try? JSON.parse(value) else { throw ValidationError("the value is not valid JSON") }
        try await options.perform(.activitySet(value: json)) { _ in print("activity set") }
    }
}
