import Foundation
@testable import HuddleKit
import Testing

@Suite("The journal is live (issue 38 item 4)", .timeLimit(.minutes(10)))
struct JournalLiveTests {
    @Test func heldAttachmentsFollowTheirStateListsSkipProgressAndAddCanWaitForReplication() async throws {
        let nodes = try Nodes("live")
        defer { nodes.shutdown() }
        let a = try await nodes.session("ann")
        let b = try await nodes.session("ben")
        let ja = GroupSessionJournal(session: a), jb = GroupSessionJournal(session: b)
        let lists = Collected(jb.attachments.mapped { $0 })
        let progress = Collected(jb.progressUpdates.mapped { $0.id })
        for s in [a, b] { try await s.joinAndWait() }
        try await eventually("2 participants") { b.activeParticipants.count == 2 }

        let bytes = Data((0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })  // 16 chunks
        let added = try await ja.add(bytes, metadata: ImageMetadata(location: [1, 2], canvas: "c"), until: .replicated)
        #expect(added.state == .replicated, "add(until: .replicated) returns once two members hold every chunk")
        try await eventually("ben to list it") { await lists.elements.contains { $0.map(\.id) == [added.id] } }
        let held = try #require(await lists.elements.first { !$0.isEmpty }?.first)
        try await eventually("the held value to read complete and replicated") { held.isComplete && held.state == .replicated }
        #expect(held.progress == 1)
        let ticks = await progress.elements.count
        let yielded = await lists.elements.count
        #expect(ticks >= 1)
        // One list at join, then at most: added, complete here, replicated (in any grouping).
        #expect(yielded <= 4, "lists are yielded on list and state changes, not per chunk (\(yielded) lists, \(ticks) progress ticks)")
        try await ja.remove(attachment: added)
        // Each member's value follows its own node's events: ben's and ann's come apart.
        try await eventually("the held value to read removed") { held.state == .removed }
        try await eventually("ann's value to read removed") { added.state == .removed }
        for s in [a, b] { await s.disconnect() }
    }

    @Test func filesToAddAreCreatedExclusivelyReadableByTheUserAloneInAPrivateDirectory() throws {
        let directory = try PrivateDirectory()
        defer { directory.remove() }
        var info = stat()
        #expect(stat(directory.path, &info) == 0 && info.st_mode & 0o777 == 0o700)
        let path = try directory.write(Data("secret".utf8), to: "f")
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data("secret".utf8))
        #expect(throws: HuddleKitError.self, "O_EXCL: an existing file is never reused") { try directory.write(Data("x".utf8), to: "f") }
        #expect(symlink("/etc/passwd", directory.file("link")) == 0)
        #expect(throws: HuddleKitError.self, "a planted link is not followed") { try directory.write(Data("x".utf8), to: "link") }
    }
}
