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
    func perform(_ request: ControlRequest, show: (ControlResponse) throws -> Void) async throws {
        try await perform({ () throws(ControlError) in request }, show: show)
    }

    /// As `perform(_:show:)`, with the request made once connected: a request the CLI checks as
    /// the node would (`make` throws the node's own `ControlError`) fails as the node's refusal did.
    func perform(_ make: () throws(ControlError) -> ControlRequest, show: (ControlResponse) throws -> Void) async throws {
        let client = try await connect()
        defer { Task { await client.close() } }
        try await perform(make, on: client, show: show)
    }

    /// Connects to the node, or exits 3 with one line saying why not.
    func connect() async throws -> ControlClient {
        do {
            return try await ControlClient.connect(path: path)
        } catch where error.code == .untrustedPath {
            complain(error.message)
            throw ExitCode(3)
        } catch {
            complain("no node is running at \(path) (start one with: huddle run --key FILE --control \(path))")
            throw ExitCode(3)
        }
    }

    /// One request on `client`: the reply printed (raw with --json, else via `show`), failures mapped to exit codes.
    func perform(_ make: () throws(ControlError) -> ControlRequest, on client: ControlClient, show: (ControlResponse) throws -> Void) async throws {
        do {
            let response = try await client.request(try make())
            if json { print(JSON.object(response.fields).serialized) } else { try show(response) }
        } catch let error as ControlError where error.code.wire != nil {
            throw refuse(error)
        } catch {
            complain("\(error)")
            throw ExitCode(1)
        }
    }

    /// Prints the node's refusal (as a reply with --json, and its one line on stderr) and returns exit code 1.
    func refuse(_ error: ControlError) -> ExitCode {
        if json {
            print(JSON.object(ControlReply.error(id: .null, error)).serialized)
        }
        complain("\(error)")
        return ExitCode(1)
    }
}

/// A clock as `plain` shows it: the JSON object the node wrote (member → seq, in its order).
func plain(clock: [ControlClockEntry]) -> String {
    var object = JSONObject()
    for entry in clock { object[entry.member] = .int(entry.seq) }
    return JSON.object(object).serialized
}

/// A JSON value as a person reads it: strings bare, everything else as JSON.
func plain(_ value: JSON?) -> String {
    guard let value else { return "-" }
    if case let .string(s) = value { return s }
    return value.serialized
}
