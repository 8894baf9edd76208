import ArgumentParser
import HuddleControl

/// `huddle admins`: shows the session's admin set, or (an admin, with `--add`/`--remove`) changes
/// it by a signed epoch change (issue 33; op `admins`, an extension of CONTROL.md).
struct AdminsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admins",
        abstract: "Show the session's admins, or change them (an admin only).",
        discussion: """
            Admins are fixed with the session key (huddle keygen --admin NODE) and are the only \
            members that may remove members, rekey, or change the admins. A change is a signed epoch \
            change every member checks against the admins of the epoch before; an admin may remove \
            itself, never the last admin. A session made without admins never gets any.
            """
    )
    @Option(name: .long, help: "A node key (64 hex digits) to make an admin (repeatable).") var add: [String] = []
    @Option(name: .long, help: "A node key (64 hex digits) to take out of the admins (repeatable).") var remove: [String] = []
    @OptionGroup var options: ControlOptions

    func run() async throws {
        try await options.perform(.admins(add: add, remove: remove)) { response in
            guard case let .admins(admins, epoch) = response.result else { return }
            print(admins.isEmpty ? "the session has no admins (every member may remove and rekey)" : admins.joined(separator: "\n"))
            if !add.isEmpty || !remove.isEmpty { print("the session is on epoch \(epoch)") }
        }
    }
}
