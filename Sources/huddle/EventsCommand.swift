import ArgumentParser
import Foundation
import HuddleControl

struct EventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Stream the node's events as JSON lines until the node closes the connection.",
        discussion: "Reconnect with --since CURSOR to receive every retained event after CURSOR first."
    )
    @Option(name: .long, help: "Replay retained events after this cursor first.") var since: Int64?
    @Option(name: .long, parsing: .upToNextOption, help: "Topics: members, messages, attachments, activity (comma- or space-separated; default all).")
    var topics: [String] = []
    @OptionGroup var options: ControlOptions

    func run() async throws {
        let client: ControlClient
        do {
            client = try await ControlClient.connect(path: options.path)
        } catch where error.code == .untrustedPath {
            complain(error.message)
            throw ExitCode(3)
        } catch {
            complain("no node is running at \(options.path) (start one with: huddle run --key FILE --control \(options.path))")
            throw ExitCode(3)
        }
        let list = topics.flatMap { $0.split(separator: ",").map(String.init) }
        do {
            // Topics are checked as the node checks them (the same refusal for an unknown one).
            let named = try Set(list.map { (name: String) throws(ControlError) -> ControlTopic in try ControlRequest.topic(.string(name)) })
            let reply = try await client.request(.subscribe(topics: list.isEmpty ? ControlTopic.defaults : named, since: since))
            if options.json { writeLine(JSON.object(reply.fields)) }
            for try await event in await client.events() {
                writeLine(JSON.object(event))
                if event["event"] == .string("overflow") {
                    complain("fell behind the node's event stream; resume with: huddle events --since \(plain(event["resume"]))")
                    throw ExitCode(1)
                }
            }
        } catch let error as ControlError where error.code.wire != nil {
            complain("\(error)")
            throw ExitCode(1)
        }
    }
}

/// One JSON line on standard output, written at once (not held in a buffer) so pipes see it live.
private func writeLine(_ value: JSON) {
    var bytes: [UInt8] = []
    value.write(into: &bytes)
    bytes.append(0x0A)
    FileHandle.standardOutput.write(Data(bytes))
}
