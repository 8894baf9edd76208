// Apple's GroupActivities code for DrawTogether, extended to every name issue 38 lists, with
// `import GroupActivities` changed to `import HuddleKit` and nothing else imported. What each
// program saw goes into `Seen`, which the test (AppleCodeTests.swift) checks.
import HuddleKit

struct DrawTogether: GroupActivity {
    var metadata: GroupActivityMetadata { var m = GroupActivityMetadata(); m.title = "Draw Together"; m.type = .generic; return m }
}
struct Stroke: Codable, Sendable, Equatable { var points: [Double]; var color: String }
struct ImageMeta: Codable, Sendable, Equatable { var x: Double; var y: Double }

/// What the programs saw, by key.
actor Seen {
    private(set) var values: [String: String] = [:]
    func put(_ key: String, _ value: some CustomStringConvertible) { values[key] = value.description }
}

struct AppleCodeFailure: Error, CustomStringConvertible { let description: String }

/// Ann's program: checks it can activate, activates, draws for ben (to all, to him, to a set of
/// him, as bytes), adds an image and removes it once ben loaded it, sets the activity, ends it;
/// then activates again, and ends that session once ben said he leaves.
func annProgram(_ seen: Seen) async throws {
    guard await DrawTogether().prepareForActivation() == .activationPreferred else { throw AppleCodeFailure(description: "no node") }
    _ = try await DrawTogether().activate()
    var round = 0
    for await session in DrawTogether.sessions() {
        round += 1
        let messenger = GroupSessionMessenger(session: session)
        let fast = GroupSessionMessenger(session: session, deliveryMode: .unreliable)
        let journal = GroupSessionJournal(session: session)
        var strokes = messenger.messages(of: Stroke.self).makeAsyncIterator()
        session.join()
        await seen.put("ann.\(round).initiated", session.isLocallyInitiated)
        await seen.put("ann.\(round).id", session.id)
        await seen.put("ann.\(round).me", session.localParticipant.id)
        await seen.put("ann.\(round).title", session.activity?.metadata.title ?? "none")
        for await state in session.$state.values where state == .joined { break }
        if round == 1 { session.activity = DrawTogether() }  // settable, as in Apple's API
        var ben: Participant?
        for await participants in session.$activeParticipants.values {
            ben = participants.first { $0 != session.localParticipant }
            if ben != nil { break }
        }
        guard let ben else { throw AppleCodeFailure(description: "no ben") }
        await seen.put("ann.\(round).ben", ben.id)
        if round == 2 {
            while let (stroke, _) = await strokes.next(), stroke.color != "leaving" {}
            session.end()
            await seen.put("ann.2.state", session.state == .invalidated(reason: .ended))
            return
        }
        try await messenger.send(Stroke(points: [1, 2], color: "red"))
        try await messenger.send(Stroke(points: [3], color: "blue"), to: .only(ben))
        try await messenger.send(Stroke(points: [4], color: "green"), to: .only([ben]))
        try await messenger.send(Data([0, 1, 2, 255]))
        _ = try? await fast.send(Stroke(points: [5], color: "fast"))  // best effort: not checked
        let image = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let a = try await journal.add(image, metadata: ImageMeta(x: 10, y: 20))
        while let (stroke, context) = await strokes.next() {
            await seen.put("ann.1.from", context.source.id)
            if stroke.color == "loaded" { break }
        }
        try await journal.remove(attachment: a)
        while let (stroke, _) = await strokes.next(), stroke.color != "removed-seen" {}
        session.end()
        await seen.put("ann.1.state", session.state == .invalidated(reason: .ended))
        _ = try await DrawTogether().activate()
    }
}

/// Ben's program: joins each session it is given; in the first, takes ann's strokes, bytes and
/// image, says so, and sees the activity and its end; in the second, says it leaves and leaves.
func benProgram(_ seen: Seen) async throws {
    var round = 0
    for await session in DrawTogether.sessions() {
        round += 1
        let messenger = GroupSessionMessenger(session: session)
        let journal = GroupSessionJournal(session: session)
        var strokes = messenger.messages(of: Stroke.self).makeAsyncIterator()
        var bytes = messenger.messages(of: Data.self).makeAsyncIterator()
        session.join()
        await seen.put("ben.\(round).initiated", session.isLocallyInitiated)
        await seen.put("ben.\(round).id", session.id)
        await seen.put("ben.\(round).me", session.localParticipant.id)
        if round == 2 {
            for await participants in session.$activeParticipants.values where participants.count == 2 { break }
            let ann = session.activeParticipants.first { $0 != session.localParticipant }!
            try await messenger.send(Stroke(points: [], color: "leaving"), to: .only(ann))
            session.leave()
            await seen.put("ben.2.state", session.state == .invalidated(reason: .left))
            return
        }
        var colors: [String] = []
        var ann: Participant?
        while colors.count < 3, let (stroke, context) = await strokes.next() {
            if stroke.color != "fast" { colors.append(stroke.color) }
            ann = context.source
        }
        await seen.put("ben.1.colors", colors.joined(separator: ","))
        await seen.put("ben.1.bytes", (await bytes.next()).map { Array($0.0).description } ?? "none")
        guard let ann else { throw AppleCodeFailure(description: "no ann") }
        await seen.put("ben.1.ann", ann.id)
        loading: for await list in journal.attachments {
            for a: GroupSessionJournal.Attachment in list {
                let data = try await a.load(Data.self)
                let meta = try await a.loadMetadata(of: ImageMeta.self)
                await seen.put("ben.1.image", "\(data.count) \(data.prefix(4).map { $0 }) \(meta.x),\(meta.y)")
                break loading
            }
        }
        try await messenger.send(Stroke(points: [], color: "loaded"), to: .only(ann))
        for await list in journal.attachments where list.isEmpty { break }
        try await messenger.send(Stroke(points: [], color: "removed-seen"))
        for await activity in session.$activity.values where activity != nil {
            await seen.put("ben.1.activity", activity?.metadata.title ?? "none")
            break
        }
        for await state in session.$state.values {
            if case let .invalidated(reason) = state { await seen.put("ben.1.reason", reason); break }
        }
    }
}
