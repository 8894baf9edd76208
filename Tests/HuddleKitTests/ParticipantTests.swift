import Foundation
import HuddleControl
@testable import HuddleKit
import HuddleTestSupport
import Testing

/// Issue 38 item 1 with real nodes: participants are programs, not nodes.
@Suite("Participants are programs", .timeLimit(.minutes(10)))
struct ParticipantTests {
    /// The members the participants of `session` run on, by the nodes' names.
    private func names(_ session: GroupSession<Drawing>) -> [String] { session.activeParticipants.map(\.name).sorted() }

    /// The node's own answer to `participants` (as `huddle participants --json` prints it).
    private func cli(_ arguments: [String]) throws -> (status: Int32, out: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: huddleBinary)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try TestProcesses.launch(process)
        let out = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: out, as: UTF8.self))
    }

    @Test func aNodeWithoutAProgramIsNoParticipantLeaveIsLocalAndEndInvalidatesEveryone() async throws {
        let nodes = try Nodes("programs")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let catControl = try await nodes.start("cat")  // a node with no program running
        let seenAtA = Collected(a.activeParticipantsUpdates)
        for s in [a, b] { try await s.joinAndWait() }
        try await eventually("ann and ben to see the two programs") {
            a.activeParticipants == [a.localParticipant, b.localParticipant] && b.activeParticipants == a.activeParticipants
        }
        #expect(!a.activeParticipants.contains { $0.name == "cat" }, "cat's node runs no program")
        #expect(a.localParticipant.member != b.localParticipant.member)
        // cat's node knows the two programs too, and lists none of its own (`huddle participants`).
        try await eventually("cat's node to list both") {
            let listed = try cli(["participants", "--json", "--control", catControl])
            guard listed.status == 0, case let .object(reply) = try JSON.parse(Array(listed.out.utf8)) else { return false }
            let ids = Set((reply["participants"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue })
            return ids == [a.localParticipant.id, b.localParticipant.id]
        }
        let table = try cli(["participants", "--control", catControl])
        #expect(table.status == 0 && table.out.contains(a.localParticipant.id) && table.out.contains("ben"))

        // A program started on ann's node, which was in the session already, is a new participant.
        let a2 = try await GroupSession<Drawing>.connect(control: nodes.control("ann"))
        try await a2.joinAndWait()
        try await eventually("ben to see ann's second program") { b.activeParticipants.contains(a2.localParticipant) }
        #expect(a2.localParticipant.member == a.localParticipant.member && a2.localParticipant != a.localParticipant)
        try await eventually("ann's first program to see it arrive as new") {
            let sets = await seenAtA.elements
            return zip(sets, sets.dropFirst()).contains { $1.subtracting($0) == [a2.localParticipant] }
        }

        // leave() is local: ben's program stops being a participant; ben's node stays up and in the session.
        b.leave()
        #expect(b.state == .invalidated(reason: .left))
        try await eventually("ann to see ben's program gone") { !a.activeParticipants.contains(b.localParticipant) }
        #expect(!(try nodes.hasExited("ben")))
        let status = try await ControlClient.connect(path: nodes.control("ben"))
        #expect(try await status.ask("status")["members"]?.intValue == 3, "ben's node is still in the session")
        await status.close()

        // A new program on ben's node joins; then end() invalidates every participant's session.
        let b2 = try await GroupSession<Drawing>.connect(control: nodes.control("ben"))
        try await b2.joinAndWait()
        try await eventually("three programs everywhere") { [a, a2, b2].allSatisfy { $0.activeParticipants.count == 3 } }
        #expect(names(a) == ["ann", "ann", "ben"])
        a.end()
        #expect(a.state == .invalidated(reason: .ended))
        try await eventually("every participant's session to end") {
            a2.state == .invalidated(reason: .ended) && b2.state == .invalidated(reason: .ended)
        }
        try await eventually("no participant left at cat's node") {
            let listed = try cli(["participants", "--json", "--control", catControl])
            return listed.status == 0 && listed.out.contains("\"participants\":[]")
        }
        let exited = try (nodes.hasExited("ann"), nodes.hasExited("ben"))
        #expect(exited == (false, false), "end() ends the activity, not the nodes")
    }

    /// A program that is killed (its control connection closes) disappears from the others'
    /// `activeParticipants`, and so does one whose node is killed. The program is `huddle
    /// participants --join`, killed with SIGKILL; the time from the kill to its disappearance at
    /// another node's program is printed (5 rounds, then the node's kill).
    @Test func aKilledProgramDisappearsFromTheOthersParticipants() async throws {
        let nodes = try Nodes("killed")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let benControl = try await nodes.start("ben")
        try await nodes.start("cat")
        try await a.joinAndWait()
        var times: [Double] = []
        /// Starts a participant program on ben's node and returns it with its id, once ann sees it.
        func startProgram() async throws -> (Process, String) {
            let program = Process()
            program.executableURL = URL(fileURLWithPath: huddleBinary)
            program.arguments = ["participants", "--join", Drawing.activityIdentifier, "--control", benControl]
            let pipe = Pipe()
            program.standardOutput = pipe
            program.standardError = FileHandle.nullDevice
            try TestProcesses.launch(program)
            let id = String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(id.count == 16, "the program prints its participant id")
            try await eventually("ann to see ben's program") { a.activeParticipants.contains { $0.id == id && $0.name == "ben" } }
            return (program, id)
        }
        /// Seconds from now until ann no longer lists program `id` (30 s at most).
        func secondsUntilGone(_ id: String) async throws -> Double {
            let killed = ContinuousClock.now
            let deadline = killed + .seconds(30)
            while a.activeParticipants.contains(where: { $0.id == id }), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            let gone = ContinuousClock.now - killed
            #expect(!a.activeParticipants.contains { $0.id == id }, "the killed program is gone")
            return gone / .seconds(1)
        }
        for _ in 0..<5 {
            let (program, id) = try await startProgram()
            kill(program.processIdentifier, SIGKILL)
            times.append(try await secondsUntilGone(id))
            program.waitUntilExit()
        }
        #expect(!(try nodes.hasExited("ben")))
        let sorted = times.sorted()
        print("killed program gone at another node's program after (s): \(times.map { String(format: "%.3f", $0) }); median \(String(format: "%.3f", sorted[sorted.count / 2]))")
        // The node fails: its program is gone with it.
        let (program, id) = try await startProgram()
        try await nodes.kill("ben")
        let nodeGone = try await secondsUntilGone(id)
        print("a killed node's program gone at another node's program after \(String(format: "%.3f", nodeGone)) s")
        program.waitUntilExit()
        await a.disconnect()
    }
}
