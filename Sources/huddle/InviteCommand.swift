import ArgumentParser
import Foundation
import HuddleControl
import HuddleNode

/// `huddle invite`: a one-time code that pairs a new host with this session (no key file to copy).
struct InviteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "invite",
        abstract: "Make a one-time pairing code for a new host, and print what to type there.",
        discussion: """
            The new host runs `huddle run --invite CODE --join ADDR`: the two nodes run a \
            password-authenticated key exchange (CPace) over the code, and this node sends the \
            session key only once both sides proved they know the code. A wrong code learns nothing; \
            three wrong attempts burn the invitation. Read the code to the other person over a \
            channel you trust (in person, a call); it is useless once used or expired.
            """
    )
    @Option(name: .long, help: "How long the code stays valid: seconds, or a number with s, m, h or d (default 10m, at most 7d).")
    var ttl: String = "10m"
    @Option(name: .long, help: "How many hosts may pair with this code (default 1).")
    var uses: Int = 1
    @OptionGroup var options: ControlOptions

    func validate() throws {
        guard let seconds = parseDuration(ttl) else { throw ValidationError("--ttl: \"\(ttl)\" is not a duration (e.g. 90s, 10m, 2h, 1d)") }
        guard seconds >= 1, seconds <= 7 * 24 * 3600 else { throw ValidationError("--ttl must be between 1s and 7d") }
        guard (1...ControlRequest.maximumInviteUses).contains(uses) else { throw ValidationError("--uses must be between 1 and \(ControlRequest.maximumInviteUses)") }
    }

    func run() async throws {
        let ttlMs = Int64((parseDuration(ttl) ?? 600) * 1000)
        try await options.perform(.invite(ttlMs: ttlMs, uses: uses)) { response in
            let invitation = try response.invitation
            let code = invitation.code, addr = invitation.addr
            let minutes = Double(invitation.expiresMs) / 60_000
            print("invitation code: \(code)")
            print("valid for \(String(format: "%.0f", minutes.rounded(.up))) min, \(uses) use\(uses == 1 ? "" : "s")")
            print("")
            print("on the new host, type:")
            print("  huddle run --invite \(code) --join \(addr) --key-out huddle.key")
        }
    }
}
