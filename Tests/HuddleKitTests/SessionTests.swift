import Foundation
@testable import HuddleKit
import Testing

@Suite("GroupSession against real nodes", .timeLimit(.minutes(10)))
struct SessionTests {
    @Test func activeParticipantsGrowAndShrinkAsProgramsJoinAndTheirNodesLeave() async throws {
        let nodes = try Nodes("members")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        #expect(a.state == .waiting)
        #expect(a.activeParticipants.isEmpty)
        let updates = Collected(a.activeParticipantsUpdates)
        try await a.joinAndWait()
        #expect(a.state == .joined)
        #expect(a.activeParticipants == [a.localParticipant])
        #expect(a.localParticipant.name == "ann")

        let ben = try await nodes.session("ben")
        let cat = try await nodes.session("cat")
        try await ben.joinAndWait()
        try await cat.joinAndWait()
        try await eventually("ann to see ben's and cat's programs") { Set(a.activeParticipants.map(\.name)) == ["ann", "ben", "cat"] }
        try await ben.leaveWithNode()  // the node leaves the session and exits
        #expect(ben.state == .invalidated(reason: .left))
        try await eventually("ben's node to exit") { try nodes.hasExited("ben") }
        try await eventually("ann to see ben leave") { Set(a.activeParticipants.map(\.name)) == ["ann", "cat"] }

        // The sequence delivers on its own task: wait until it has yielded the set the property already shows.
        try await eventually("the updates to reach ann and cat") {
            await updates.elements.last.map { Set($0.map(\.name)) } == ["ann", "cat"]
        }
        // Each update is a whole set; the deltas between them are the joins and the leave, in order.
        let sets = await updates.elements
        #expect(sets.first == [a.localParticipant])
        var joined: [String] = [], left: [String] = []
        for (old, new) in zip(sets, sets.dropFirst()) {
            joined += new.subtracting(old).map(\.name).sorted()
            left += old.subtracting(new).map(\.name).sorted()
            #expect(new != old, "an update changes the set")
            #expect(new.contains(a.localParticipant))
        }
        #expect(joined == ["ben", "cat"] || joined == ["cat", "ben"])
        #expect(left == ["ben"])
        await a.disconnect()
        await cat.disconnect()
    }

    @Test func theActivityIsTypedAndConvergesAndAnotherAppsActivityReadsAsNil() async throws {
        let nodes = try Nodes("activity")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let quiz = try await GroupSession<Quiz>.connect(control: nodes.control("ben"))
        let seen = Collected(b.activityUpdates.mapped { $0 })
        for s in [a, b] { try await s.joinAndWait() }
        try await quiz.joinAndWait()
        #expect(b.activity == nil)
        try await a.setActivity(Drawing(canvas: "c1"))
        #expect(a.activity == Drawing(canvas: "c1"))
        try await eventually("ben to see c1") { b.activity == Drawing(canvas: "c1") }
        try await b.setActivity(Drawing(canvas: "c2"))
        try await eventually("ann to see c2") { a.activity == Drawing(canvas: "c2") }
        #expect(quiz.activity == nil, "a Drawing is not a Quiz")
        try await eventually("ben's updates") { await seen.elements.compactMap { $0?.canvas } == ["c1", "c2"] }
        #expect(await seen.elements.first == .some(nil), "the first update is the value at join: none")
        try await quiz.setActivity(Quiz(round: 3))
        try await eventually("ann to read another app's activity as nil") { a.activity == nil }
        for s in [a, b] { await s.disconnect() }
        await quiz.disconnect()
    }

    @Test func aLostConnectionResumesFromTheLastCursorWithNothingLostOrRepeated() async throws {
        let nodes = try Nodes("resume")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let sender = GroupSessionMessenger(session: a)
        let received = Collected(GroupSessionMessenger(session: b).messages(of: Ping.self).mapped { $0.0.n })
        for s in [a, b] { try await s.joinAndWait() }
        try await eventually("2 participants") { b.activeParticipants.count == 2 }
        for n in 0..<20 { try await sender.send(Ping(n: n)) }
        try await eventually("the first 20") { await received.elements.count == 20 }
        for round in 0..<3 {
            await b.hub.connection.dropConnections()
            for n in 0..<20 { try await sender.send(Ping(n: 20 + round * 20 + n)) }
            try await eventually("round \(round) after the drop") { await received.elements.count == 40 + round * 20 }
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(await received.elements == Array(0..<80), "every message once, in order")
        #expect(await b.hub.connection.resumes >= 3)
        #expect(b.state == .joined)
        // Requests work again on a fresh connection too.
        try await GroupSessionMessenger(session: b).send(Ping(n: 1000))
        for s in [a, b] { await s.disconnect() }
    }

    @Test func aRestartedNodeInvalidatesTheSessionAndSoDoesAVanishedOne() async throws {
        let nodes = try Nodes("restart")
        defer { nodes.shutdown() }
        let control = try await nodes.start("ann")
        let restarted = try await GroupSession<Drawing>.connect(control: control, reconnectTimeout: .seconds(60))
        let states = Collected(restarted.stateUpdates)
        let messages = Collected(GroupSessionMessenger(session: restarted).messages(of: Ping.self).mapped { $0.0 })
        try await restarted.joinAndWait()
        try await nodes.kill("ann")
        try await nodes.start("ann", dataDir: "\(nodes.dir)/ann.data-again")
        try await eventually("the session to be invalidated") { restarted.state == .invalidated(reason: .nodeRestarted) }
        try await eventually("the state sequence to end") { await states.ended }
        #expect(await states.elements == [.waiting, .joined, .invalidated(reason: .nodeRestarted)])
        try await eventually("the message sequence to end") { await messages.ended }

        let vanished = try await GroupSession<Drawing>.connect(control: control, reconnectTimeout: .seconds(1))
        try await vanished.joinAndWait()
        try await nodes.kill("ann")
        try await eventually("the session to give up") { vanished.state == .invalidated(reason: .noNode(path: control)) }
        await #expect(throws: HuddleKitError.noNode(path: "\(nodes.dir)/nobody.sock")) {
            _ = try await GroupSession<Drawing>.connect(control: "\(nodes.dir)/nobody.sock")
        }
    }
}
