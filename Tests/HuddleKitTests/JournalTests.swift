import Foundation
import HuddleKit
import Testing

struct ImageMetadata: Codable, Sendable, Equatable { let location: [Double]; let canvas: String }

@Suite("GroupSessionJournal against real nodes", .timeLimit(.minutes(10)))
struct JournalTests {
    @Test func attachmentsAppearForEveryoneLoadWholeWithTheirMetadataAndGoAwayWhenRemoved() async throws {
        let nodes = try Nodes("journal")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let ja = GroupSessionJournal(session: a), jb = GroupSessionJournal(session: b)
        let lists = Collected(jb.attachments.mapped { $0 })
        for s in [a, b] { try await s.joinAndWait() }
        try await eventually("2 participants") { b.activeParticipants.count == 2 }

        let bytes = Data((0..<(700 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })  // 3 chunks
        let added = try await ja.add(bytes, metadata: ImageMetadata(location: [120, 80.5], canvas: "c1"), name: "photo.bin")
        #expect(added.size == Int64(bytes.count))
        #expect(added.name == "photo.bin")
        #expect(added.uploader == a.localParticipant)
        #expect(added.progress == 1)

        try await eventually("ben's journal to list it, complete") {
            await lists.elements.last.map { $0.count == 1 && $0[0].id == added.id && $0[0].isComplete } ?? false
        }
        let seen = try #require(await lists.elements.last?.first)
        #expect(try await seen.loadMetadata(of: ImageMetadata.self) == ImageMetadata(location: [120, 80.5], canvas: "c1"))
        #expect(try await seen.load(Data.self) == bytes)
        let out = URL(fileURLWithPath: "\(nodes.dir)/out.bin")
        try await seen.load(to: out)
        #expect(try Data(contentsOf: out) == bytes)
        // Progress is reported on the way: the first list ben saw showed it incomplete or it arrived whole.
        let progress = await lists.elements.compactMap(\.first?.progress)
        #expect(progress.last == 1)
        #expect(progress == progress.sorted(), "progress only grows")
        await #expect(throws: HuddleKitError.self) { _ = try await seen.loadMetadata(of: Ping.self) }

        // A late joiner gets the attachment without the uploader sending it again.
        let c = try await nodes.session("cat")
        let jc = GroupSessionJournal(session: c)
        try await c.joinAndWait()
        try await eventually("cat to list it") { jc.currentAttachments.map(\.id) == [added.id] }
        #expect(try await jc.currentAttachments[0].load(Data.self) == bytes)

        // Only its uploader (or an admin) removes an attachment (issue 33): ben may not, ann may.
        await #expect(throws: HuddleKitError.self) { try await jb.remove(attachment: seen) }
        try await ja.remove(attachment: added)
        try await eventually("ann's list to be empty") { ja.currentAttachments.isEmpty }
        try await eventually("ben's sequence to end with an empty list") { await lists.elements.last?.isEmpty == true }
        do {
            _ = try await seen.load(Data.self)
            Issue.record("a removed attachment loaded")
        } catch {
            if case .notFound = error {} else { Issue.record("expected notFound, got \(error)") }
        }
        for s in [a, b, c] { await s.disconnect() }
    }

    @Test func anAttachmentOverTheLimitOrAMissingFileIsATypedError() async throws {
        let nodes = try Nodes("jlimits")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let journal = GroupSessionJournal(session: a)
        try await a.joinAndWait()
        let huge = ImageMetadata(location: Array(repeating: 1.5, count: 5000), canvas: "")  // > 16 KiB of metadata
        do { try await journal.add(Data([1, 2, 3]), metadata: huge); Issue.record("huge metadata accepted") } catch {
            if case .tooLarge = error {} else if case .badRequest = error {} else { Issue.record("expected tooLarge, got \(error)") }
        }
        do {
            try await journal.add(contentsOf: URL(fileURLWithPath: "\(nodes.dir)/missing.png"), metadata: ["x": 1])
            Issue.record("a missing file was added")
        } catch {
            switch error {
            case .ioError, .notFound, .badRequest: #expect(!error.description.contains("\n"))
            default: Issue.record("expected an i/o error, got \(error)")
            }
        }
        await a.disconnect()
    }
}
