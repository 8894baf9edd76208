import Foundation
import HuddleCore
import Testing
@testable import HuddleNode

/// CONTROL.md, Restart: the node's state in its data directory — what a commit writes is what the
/// next run loads, a member that began to leave never comes back, and a directory is one node's.
@Suite struct NodeStateStoreTests {
    private func directory() throws -> String {
        var template = Array("/tmp/hd-state-XXXXXX".utf8CString)
        return String(cString: try #require(mkdtemp(&template)))
    }

    private func point(_ seq: UInt64) -> ResumePoint {
        ResumePoint(member: MemberID(raw: 7), incarnation: 2, ownSeq: seq, counter: seq + 1, delivered: [MemberID(raw: 7): seq, MemberID(raw: 8): 40],
                    baseline: [MemberID(raw: 8): 3], nonApplication: [MemberID(raw: 8): 1], addresses: ["127.0.0.1:7400"], epochs: nil)
    }

    /// (The reopen by a next run is RestartProcessTests', with real processes: a reopen right after
    /// `close` in this test process was once refused as locked under the full suite's load, cause
    /// not found; a node's lock ends with its process.)
    @Test func whatACommitWritesIsWhatALoadReads() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (store, damage) = try NodeStateStore.open(directory: dir)
        defer { store.close() }
        #expect(damage == nil)
        #expect(try store.load() == nil, "a new directory holds no member")
        let events = (1...5).map { NodeStateStore.StoredEvent(cursor: Int64($0), topic: 2, line: Array("{\"event\":\"message\",\"cursor\":\($0)}\n".utf8)) }
        try store.commit(events: events, firstRetained: 2, lastCursor: 5, point: point(9), own: [], ownFrom: 10, parts: [])
        let loaded = try #require(try store.load())
        #expect(loaded.point == point(9))
        #expect(loaded.lastCursor == 5)
        #expect(loaded.events.map(\.cursor) == [2, 3, 4, 5], "retention's start is kept")
    }

    @Test func aMemberThatBeganToLeaveIsNeverLoaded() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (store, _) = try NodeStateStore.open(directory: dir)
        defer { store.close() }
        try store.commit(events: [], firstRetained: 1, lastCursor: 0, point: point(3), own: [], ownFrom: 4, parts: [])
        #expect(try store.load() != nil)
        store.markLeaving()
        #expect(try store.load() == nil)
    }

    @Test func aSecondOpenOfADirectoryInUseIsRefused() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (first, _) = try NodeStateStore.open(directory: dir)
        #expect(throws: NodeError.self) { _ = try NodeStateStore.open(directory: dir) }
        _ = first
    }
}
