import ArgumentParser
import Foundation
import HuddleControl

/// Options every control command takes.
struct ControlOptions: ParsableArguments {
    @Option(name: .long, help: "Control socket of the node (default: $HUDDLE_CONTROL, else $XDG_RUNTIME_DIR/huddle.sock, else /tmp/huddle-$UID.sock).")
    var control: String?

    @Flag(name: .long, help: "Print the node's raw JSON reply instead of a readable summary.")
    var json = false

    var path: String { ControlPath.resolve(control) }
}

/// Writes one line to standard error, prefixed with `huddle:`.
func complain(_ message: String) {
    FileHandle.standardError.write(Data("huddle: \(message)\n".utf8))
}

extension ControlOptions {
    /// Connects, sends one request, prints the reply (raw with --json, else via `show`), and maps
    /// failures to the CLI's exit codes.
    func perform(_ op: String, _ fields: JSONObject = [:], show: (JSONObject) -> Void) async throws {
        let client = try await connect()
        defer { Task { await client.close() } }
        try await perform(op, fields, on: client, show: show)
    }

    /// Connects to the node, or exits 3 with one line saying why not.
    func connect() async throws -> ControlClient {
        do {
            return try await ControlClient.connect(path: path)
        } catch ControlClientError.untrusted(let refusal) {
            complain(refusal.message)
            throw ExitCode(3)
        } catch {
            complain("no node is running at \(path) (start one with: huddle run --key FILE --control \(path))")
            throw ExitCode(3)
        }
    }

    /// One request on `client`: the reply printed (raw with --json, else via `show`), failures mapped to exit codes.
    func perform(_ op: String, _ fields: JSONObject, on client: ControlClient, show: (JSONObject) -> Void) async throws {
        do {
            let reply = try await client.request(op, fields)
            if json { print(JSON.object(reply).serialized) } else { show(reply) }
        } catch let error as ControlError {
            if json {
                print(JSON.object(ControlReply.error(id: .null, error)).serialized)
            }
            complain("\(error.code.rawValue): \(error.message)")
            throw ExitCode(1)
        } catch {
            complain("\(error)")
            throw ExitCode(1)
        }
    }
}

/// A JSON value as a person reads it: strings bare, everything else as JSON.
func plain(_ value: JSON?) -> String {
    guard let value else { return "-" }
    if case let .string(s) = value { return s }
    return value.serialized
}
