import Foundation
@testable import HuddleKit
import Testing

struct Ping: Codable, Sendable, Equatable { let n: Int }
struct Pong: Codable, Sendable, Equatable { let word: String }
struct Note: Codable, Sendable, Equatable { let text: String; let tags: [String] }

@Suite("GroupSessionMessenger against real nodes", .timeLimit(.minutes(10)))
struct MessengerTests {
    @Test func messagesOfSeveralTypesReachOnlyTheSequenceOfTheirTypeWithTheirSource() async throws {
        let nodes = try Nodes("msg")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let ma = GroupSessionMessenger(session: a), mb = GroupSessionMessenger(session: b)
        let pings = Collected(mb.messages(of: Ping.self).mapped { $0.0 })
        let pongs = Collected(mb.messages(of: Pong.self).mapped { ($0.0, $0.1.source) })
        let notes = Collected(mb.messages(of: Note.self).mapped { $0.0 })
        let annPings = Collected(ma.messages(of: Ping.self).mapped { $0.0 })
        try await a.joinAndWait()
        try await b.joinAndWait()
        try await eventually("both sessions to see 2 participants") { a.activeParticipants.count == 2 && b.activeParticipants.count == 2 }

        try await ma.send(Ping(n: 1))
        try await ma.send(Pong(word: "hello"))
        try await ma.send(Note(text: "n", tags: ["x", "y"]), to: .only([b.localParticipant]))
        try await ma.send(Ping(n: 2))
        try await mb.send(Ping(n: 99))
        try await eventually("ben's pings") { await pings.elements == [Ping(n: 1), Ping(n: 2)] }
        try await eventually("ben's pong") { await pongs.elements.count == 1 }
        let (pong, source) = try #require(await pongs.elements.first)
        #expect(pong == Pong(word: "hello"))
        #expect(source == a.localParticipant)
        #expect(source.name == "ann")
        try await eventually("ben's note") { await notes.elements == [Note(text: "n", tags: ["x", "y"])] }
        // ann's messenger gets ben's ping, never its own.
        try await eventually("ann to get ben's ping") { await annPings.elements == [Ping(n: 99)] }
        try await Task.sleep(for: .milliseconds(300))
        #expect(await annPings.elements == [Ping(n: 99)])
        #expect(await pings.elements == [Ping(n: 1), Ping(n: 2)])
        await a.disconnect()
        await b.disconnect()
    }

    @Test func aDirectedSendReachesOnlyItsParticipantsAndUnreliableSendsArrive() async throws {
        let nodes = try Nodes("direct")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let c = try await nodes.session("cat")
        let ma = GroupSessionMessenger(session: a)
        let fast = GroupSessionMessenger(session: a, deliveryMode: .unreliable)
        let atB = Collected(GroupSessionMessenger(session: b).messages(of: Ping.self).mapped { $0.0 })
        let atC = Collected(GroupSessionMessenger(session: c).messages(of: Ping.self).mapped { $0.0 })
        for s in [a, b, c] { try await s.joinAndWait() }
        try await eventually("3 participants everywhere") { [a, b, c].allSatisfy { $0.activeParticipants.count == 3 } }
        try await ma.send(Ping(n: 1), to: .only([c.localParticipant]))
        try await ma.send(Ping(n: 2))
        try await eventually("cat to get both") { await atC.elements == [Ping(n: 1), Ping(n: 2)] }
        try await eventually("ben to get the broadcast") { await atB.elements == [Ping(n: 2)] }
        // Unreliable: one datagram each, best effort; on loopback a few of many arrive.
        for n in 10..<30 { try await fast.send(Ping(n: n)) }
        try await eventually("some unreliable pings at ben") { await atB.elements.contains { $0.n >= 10 } }
        // One read: pings may still be arriving, and two reads could see different counts.
        let got = await atB.elements.map(\.n)
        #expect(Set(got).count == got.count, "never twice: \(got)")
        for s in [a, b, c] { await s.disconnect() }
    }

    @Test func theNodesLimitsSurfaceAsTypedErrorsWithTheNodesMessage() async throws {
        let nodes = try Nodes("limits")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let messenger = GroupSessionMessenger(session: a)
        await #expect(throws: HuddleKitError.self) { try await messenger.send(Ping(n: 1)) }  // not joined yet
        try await a.joinAndWait()
        let big = Note(text: String(repeating: "x", count: 70 * 1024), tags: [])
        do {
            try await messenger.send(big)
            Issue.record("a 70 KiB message was accepted")
        } catch {
            guard case let .tooLarge(message) = error else { Issue.record("expected tooLarge, got \(error)"); return }
            #expect(!message.isEmpty)
            #expect(!error.description.contains("\n"))
        }
        let unreliable = GroupSessionMessenger(session: a, deliveryMode: .unreliable)
        await #expect(throws: HuddleKitError.self) { try await unreliable.send(Note(text: String(repeating: "y", count: 2048), tags: [])) }
        do { try await unreliable.send(Note(text: String(repeating: "y", count: 2048), tags: [])) } catch {
            if case .tooLarge = error {} else { Issue.record("expected tooLarge for a 2 KiB unreliable send, got \(error)") }
        }
        await a.disconnect()
        #expect(a.state == .invalidated(reason: .left))
        do { try await messenger.send(Ping(n: 2)); Issue.record("sent after disconnect") } catch { #expect(error == .left) }
    }
}

extension AsyncSequence where Self: Sendable, Failure == Never {
    /// `map` whose result is `Sendable` (the standard one is not, with a non-Sendable closure type).
    func mapped<T: Sendable>(_ transform: @escaping @Sendable (Element) -> T) -> SendableMap<Self, T> { SendableMap(base: self, transform: transform) }
}

struct SendableMap<Base: AsyncSequence & Sendable, T: Sendable>: AsyncSequence, Sendable where Base.Failure == Never {
    typealias Element = T
    typealias Failure = Never
    let base: Base
    let transform: @Sendable (Base.Element) -> T
    func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), transform: transform) }
    struct Iterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let transform: @Sendable (Base.Element) -> T
        mutating func next() async -> T? {
            guard let e = await base.next(isolation: nil) else { return nil }
            return transform(e)
        }
    }
}

/// The activity type of these tests.
struct Drawing: GroupActivity, Equatable { var canvas: String }
/// Another app's activity.
struct Quiz: GroupActivity, Equatable { var round: Int }
