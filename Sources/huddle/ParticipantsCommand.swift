import ArgumentParser
import Foundation
import HuddleControl

/// `huddle participants`: the programs taking part in activities, on this node and on the members
/// it is linked with (issue 38; op `participants`, an extension of CONTROL.md).
struct ParticipantsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "participants",
        abstract: "List the programs taking part in activities (those on this node marked with *).",
        discussion: """
            A participant is a program that joined an activity through this node or another member's \
            (HuddleKit's GroupSession.join(), or the control op participant.join). A node with no \
            program running has none. A program stops being one when it leaves, when its control \
            connection closes, or when its node fails.
            With --join ACTIVITY, this command itself joins ACTIVITY as a participant, prints its id and \
            stays one until it is stopped (SIGINT, SIGTERM, or killed; exit 1 when the node goes away): \
            a script's presence.
            """)
    @Option(name: .long, help: "Only the participants of this activity.") var activity: String?
    @Option(name: .long, help: "Join ACTIVITY as a participant and stay one until stopped.") var join: String?
    @OptionGroup var options: ControlOptions

    func run() async throws {
        if let join {
            // The connection stays open: the node ends the participant when it closes (this process exits).
            let client = try await options.connect()
            try await options.perform({ () throws(ControlError) in .participantJoin(activity: join, program: nil) }, on: client) { response in
                // Written at once (not buffered): whoever started this reads the id while it runs.
                FileHandle.standardOutput.write(Data((try response.participant.id + "\n").utf8))
            }
            // Until stopped, or until the node closes the connection (it stopped or left): then exit 1.
            for try await _ in await client.events() {}
            complain("the node closed the connection: no longer a participant")
            throw ExitCode(1)
        }
        try await options.perform(.participants(activity: activity)) { response in
            let rows = try response.participants.map { p in
                [(p.isSelf ? "*" : " ") + p.id, p.member, p.name, p.activity]
            }
            printTable(header: [" PARTICIPANT", "MEMBER", "NAME", "ACTIVITY"], rows: rows)
        }
    }
}
