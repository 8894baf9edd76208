import Foundation
import HuddleKit
import Testing

/// Two message types with the same bare name and the same shape, in different namespaces.
enum A { struct Note: Codable, Sendable, Equatable { let text: String } }
enum B { struct Note: Codable, Sendable, Equatable { let text: String } }

/// A type that names itself on the wire, and another type claiming the same identifier.
struct Declared: Codable, Sendable, Equatable, MessageTypeIdentifying {
    static var messageTypeIdentifier: String { "org.example.declared" }
    let n: Int
}
struct AlsoDeclared: Codable, Sendable, Equatable, MessageTypeIdentifying {
    static var messageTypeIdentifier: String { "org.example.declared" }
    let n: Int
}

@Suite("Messages are what was sent (issue 38 item 3)", .timeLimit(.minutes(10)))
struct MessageIdentityTests {
    @Test func aTypeIsMatchedByItsFullyQualifiedIdentifierNeverItsBareName() async throws {
        let nodes = try Nodes("ident")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let ma = GroupSessionMessenger(session: a), mb = GroupSessionMessenger(session: b)
        let bNotes = Collected(mb.messages(of: B.Note.self).mapped { $0.0.text })
        let aNotes = Collected(mb.messages(of: A.Note.self).mapped { $0.0.text })
        let declared = Collected(mb.messages(of: AlsoDeclared.self).mapped { $0.0.n })
        for s in [a, b] { try await s.joinAndWait() }
        try await eventually("2 participants") { a.activeParticipants.count == 2 && b.activeParticipants.count == 2 }
        try await ma.send(A.Note(text: "from A"))
        try await ma.send(Declared(n: 5))
        try await ma.send(B.Note(text: "from B"))
        // Causal order from one sender: once B's note is in, A's would have been before it.
        try await eventually("ben's B.Note") { await bNotes.elements.contains("from B") }
        #expect(await bNotes.elements == ["from B"], "A.Note must not be received as B.Note")
        try await eventually("ben's A.Note") { await aNotes.elements == ["from A"] }
        try await eventually("the declared identifier to match") { await declared.elements == [5] }
        for s in [a, b] { await s.disconnect() }
    }

    @Test func onlyDeliversToTheLiveRecipientsAndReportsTheDepartedOne() async throws {
        let nodes = try Nodes("only")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let c = try await nodes.session("cat")
        let ma = GroupSessionMessenger(session: a)
        let atB = Collected(GroupSessionMessenger(session: b).messages(of: Ping.self).mapped { $0.0 })
        for s in [a, b, c] { try await s.joinAndWait() }
        try await eventually("3 participants everywhere") { [a, b, c].allSatisfy { $0.activeParticipants.count == 3 } }
        let cat = c.localParticipant
        try await c.leaveWithNode()
        try await eventually("ann to see cat gone") { !a.activeParticipants.contains(cat) }
        let receipt = try await ma.send(Ping(n: 7), to: .only([b.localParticipant, cat]))
        #expect(receipt.skipped == [cat])
        try await eventually("ben to get the ping") { await atB.elements == [Ping(n: 7)] }
        let none = try await ma.send(Ping(n: 8), to: .only([cat]))
        #expect(none.skipped == [cat], "only departed recipients: nothing is sent, and that is reported")
        for s in [a, b] { await s.disconnect() }
    }

    @Test func onlyAParticipantReachesThatProgramNotTheOthersOnItsNode() async throws {
        let nodes = try Nodes("onlyprogram")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let a2 = try await GroupSession<Drawing>.connect(control: nodes.control("ann"))  // a second program on ann's node
        let mb = GroupSessionMessenger(session: b)
        let atA = Collected(GroupSessionMessenger(session: a).messages(of: Ping.self).mapped { $0.0.n })
        let atA2 = Collected(GroupSessionMessenger(session: a2).messages(of: Ping.self).mapped { $0.0.n })
        for s in [a, b, a2] { try await s.joinAndWait() }
        try await eventually("3 participants everywhere") { [a, b, a2].allSatisfy { $0.activeParticipants.count == 3 } }
        try await mb.send(Ping(n: 1), to: .only(a.localParticipant))
        try await mb.send(Ping(n: 2))
        // Causal order from one sender: once the second is in, the first would have been before it.
        try await eventually("ann's two programs to get the ping to all") {
            let (first, second) = (await atA.elements, await atA2.elements)
            return first.contains(2) && second.contains(2)
        }
        #expect(await atA.elements == [1, 2])
        #expect(await atA2.elements == [2], "a message for ann's first program reached her second one")
        for s in [a, b, a2] { await s.disconnect() }
    }

    @Test func sixtyFourKiBOfBinaryPayloadCrossesAsBytesAndOneMoreIsRefused() async throws {
        let nodes = try Nodes("binary")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let ma = GroupSessionMessenger(session: a)
        let atB = Collected(GroupSessionMessenger(session: b).messages(of: Data.self).mapped { $0.0 })
        for s in [a, b] { try await s.joinAndWait() }
        try await eventually("2 participants") { a.activeParticipants.count == 2 && b.activeParticipants.count == 2 }
        let payload = Data((0..<(64 * 1024)).map { _ in UInt8.random(in: 0...255) })
        try await ma.send(payload)
        try await eventually("ben to get 64 KiB") { await atB.elements.count == 1 }
        #expect(await atB.elements.first == payload, "byte for byte")
        do {
            try await ma.send(payload + Data([0]))
            Issue.record("64 KiB + 1 of payload was accepted")
        } catch {
            guard case .tooLarge = error else { Issue.record("expected tooLarge, got \(error)"); return }
        }
        for s in [a, b] { await s.disconnect() }
    }
}
