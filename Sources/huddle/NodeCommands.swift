import ArgumentParser
import Foundation
import HuddleControl

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Show this node: member id, address, session fingerprint, member count, clocks.")
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform(.status) { response in
            let s = try response.status
            let rows = [("member", s.member), ("node", s.node), ("name", s.name), ("addr", s.addr), ("session", s.session), ("epoch", "\(s.epoch)"),
                        ("members", "\(s.members)"), ("uptime_ms", "\(s.uptimeMs)"), ("clock", plain(clock: s.clock)), ("baseline", plain(clock: s.baseline)),
                        ("nat", s.nat), ("reflexive", JSON.array(s.reflexive.map(JSON.string)).serialized)]
            for (key, value) in rows { print("\(key.padding(toLength: 10, withPad: " ", startingAt: 0)) \(value)") }
        }
    }
}

struct MembersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "members", abstract: "List the session's members as this node sees them (self marked with *).")
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform(.members) { response in
            let rows = try response.members.map { m in
                [(m.isSelf ? "*" : " ") + m.member, m.name, m.addr, m.state, "\(m.incarnation)", m.path]
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
        try await options.perform(.join(addr: addr)) { response in
            guard case let .joined(members) = response.result else { return }
            print("joined through \(addr): \(members) members")
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
        var body = Array((text ?? "").utf8)
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else {
                complain("cannot read \(file)")
                throw ExitCode(1)
            }
            body = Array(data)
        }
        try await options.perform(.send(.init(body: body, to: to.isEmpty ? nil : to, reliable: !unreliable))) { response in
            let sent = try response.sent
            if let seq = sent.seq { print("\(sent.msg) seq \(seq)") } else { print(sent.msg) }
        }
    }
}

struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stats", abstract: "Show byte and message counters of this node.")
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform(.stats) { response in
            for (key, value) in try response.report {
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
        try await options.perform(.leave(timeoutMs: timeoutMs.map(Int64.init))) { _ in print("left the session") }
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
        try await options.perform(.remove(member: member)) { response in
            print("removed \(member); the session is on epoch \(try response.epoch)")
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
        try await options.perform(.rekey) { response in print("the session is on epoch \(try response.epoch)") }
    }
}

/// Prints rows under a header, each column as wide as its widest cell.
func printTable(header: [String], rows: [[String]]) {
    let widths = header.indices.map { i in ([header[i]] + rows.map { $0[i] }).map(\.count).max() ?? 0 }
    for row in [header] + rows {
        print(row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }.joined(separator: "  "))
    }
}
