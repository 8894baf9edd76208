import ArgumentParser
import CHuddleMalloc
import Foundation
import HuddleControl

/// The `huddle` command: run a node, make keys, and drive a running node through its control socket.
@main
struct Huddle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "huddle",
        abstract: "A peer-to-peer, end-to-end encrypted group-session node.",
        discussion: """
            Start nodes with `huddle run`, give them the same key from `huddle keygen`, and drive a \
            running node with the other commands (they talk to its control socket).
            Exit codes: 0 ok, 1 the node answered with an error, 2 usage, 3 no node at the control path.
            """,
        subcommands: [KeygenCommand.self, RunCommand.self, StatusCommand.self, MembersCommand.self, JoinCommand.self,
                      SendCommand.self, EventsCommand.self, AttachCommand.self, ActivityCommand.self, StatsCommand.self, ParticipantsCommand.self, InviteCommand.self,
                      RemoveCommand.self, RekeyCommand.self, AdminsCommand.self, LeaveCommand.self, DoctorCommand.self]
    )

    /// Like the default entry point, but usage errors exit 2 (CONTROL.md), not 64.
    static func main() async {
        // The node runs with one malloc arena, set before main (CHuddleMalloc); naming it here
        // keeps that module's constructor in the executable.
        _ = huddle_malloc_arenas_limited()
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            if code == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}
