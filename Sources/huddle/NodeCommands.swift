import ArgumentParser
import Foundation
import HuddleControl

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Show this node: member id, address, session fingerprint, member count, clocks.")
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform("status") { reply in
            let keys = ["member", "node", "name", "addr", "session", "epoch", "members", "uptime_ms", "clock", "baseline", "nat", "reflexive"]
            for key in keys { print("\(key.padding(toLength: 10, withPad: " ", startingAt: 0)) \(plain(reply[key]))") }
        }
    }
}

struct MembersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "members", abstract: "List the session's members as this node sees them (self marked with *).")
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform("members") { reply in
            let rows = (reply["members"]?.arrayValue ?? []).compactMap(\.objectValue).map { m in
                [(m["self"] == .bool(true) ? "*" : " ") + plain(m["member"]), plain(m["name"]), plain(m["addr"]), plain(m["state"]), plain(m["incarnation"]), plain(m["path"])]
            }
            printTable(header: [" MEMBER", "NAME", "ADDR", "STATE", "INCARNATION", "PATH"], rows: rows)
        }
    }
}

struct JoinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "join", abstract: "Join the session through the member at ADDR; returns once joined.")
    @Argument(help: "HOST:PORT of a member of the session.") var addr: String
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform("join", ["addr": .string(addr)]) { reply in
            print("joined through \(addr): \(plain(reply["members"])) members")
        }
    }
}

struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a message to every member, or to some with --to.",
        discussion: "Reliable sends arrive exactly once and in order from each sender; --unreliable sends one datagram, best effort."
    )
    @Argument(help: "The message text (or use --file).") var text: String?
    @Option(name: .long, help: "Send the bytes of this file instead of TEXT.") var file: String?
    @Option(name: .long, help: "A member id to send to; repeatable. Default: every member.") var to: [String] = []
    @Flag(name: .long, help: "Send as one datagram: no retransmission, no ordering.") var unreliable = false
    @OptionGroup var options: ControlOptions

    func validate() throws {
        guard (text == nil) != (file == nil) else { throw ValidationError("give exactly one of TEXT or --file FILE") }
    }

    func run() async throws {
        var fields: JSONObject = [:]
        if let text { fields["text"] = .string(text) }
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else {
                complain("cannot read \(file)")
                throw ExitCode(1)
            }
            fields["data"] = .string(data.base64EncodedString())
        }
        if !to.isEmpty { fields["to"] = .array(to.map { .string($0) }) }
        if unreliable { fields["reliable"] = false }
        try await options.perform("send", fields) { reply in
            if let seq = reply["seq"], seq != .null { print("\(plain(reply["msg"])) seq \(plain(seq))") } else { print(plain(reply["msg"])) }
        }
    }
}

struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stats", abstract: "Show byte and message counters of this node.")
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform("stats") { reply in
            for (key, value) in reply where key != "id" && key != "ok" {
                print("\(key.padding(toLength: 20, withPad: " ", startingAt: 0)) \(plain(value))")
            }
        }
    }
}

struct LeaveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "leave", abstract: "Make the node leave the session gracefully and exit.")
    @Option(name: .customLong("timeout-ms"), help: "How long the node may spend handing off data before it leaves.") var timeoutMs: Int?
    @OptionGroup var options: ControlOptions

    func run() async throws {
        var fields: JSONObject = [:]
        if let timeoutMs { fields["timeout_ms"] = .int(Int64(timeoutMs)) }
        try await options.perform("leave", fields) { _ in print("left the session") }
    }
}

struct RemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a member from the session for good and rotate the session key to everyone else.",
        discussion: """
            MEMBER is a member id (16 hex digits, from `huddle members`) or a node key (64 hex digits): \
            the key is removed, with every run of that node. The new key is sealed to each remaining \
            member's node key; the removed node cannot link, send, receive or fetch from then on. It \
            keeps what it had already received. Replies once every remaining live member is on the new epoch.
            """
    )
    @Argument(help: "Member id (16 hex digits) or node key (64 hex digits) to remove.") var member: String
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform("remove", ["member": .string(member)]) { reply in
            print("removed \(member); the session is on epoch \(plain(reply["epoch"]))")
        }
    }
}

struct RekeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract: "Rotate the session key, removing nobody.",
        discussion: "Members offline during the rotation are handed the new key when they come back (within --rekey-grace)."
    )
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform("rekey") { reply in print("the session is on epoch \(plain(reply["epoch"]))") }
    }
}

/// Prints rows under a header, each column as wide as its widest cell.
func printTable(header: [String], rows: [[String]]) {
    let widths = header.indices.map { i in ([header[i]] + rows.map { $0[i] }).map(\.count).max() ?? 0 }
    for row in [header] + rows {
        print(row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }.joined(separator: "  "))
    }
}
