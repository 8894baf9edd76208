import Foundation
import HuddleControl

/// The session's attachments, as SharePlay's `GroupSessionJournal`: files every participant gets,
/// late joiners included, without the uploader sending them again; each lives as long as some
/// member holds it.
///
/// Guarantees: every participant sees the same attachments (journal entries travel by causal
/// broadcast); `attachments` yields the whole current list after each change; an attachment is at
/// most 100 MiB and its metadata at most 16 KiB (`.tooLarge` otherwise).
public final class GroupSessionJournal: Sendable {
    /// The attachment lists, each the whole current list, as SharePlay's `Attachments`.
    public struct Attachments: AsyncSequence, Sendable {
        /// The whole current list of attachments, oldest first.
        public typealias Element = [Attachment]
        /// The sequence never throws: it ends when the session is invalidated.
        public typealias Failure = Never
        let base: AsyncStream<[Attachment.Record]>
        let hub: SessionHub

        /// An iterator starting with the list at the time the sequence was made (once joined).
        public func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), hub: hub) }

        /// Turns the node's attachment objects into `Attachment` values.
        public struct Iterator: AsyncIteratorProtocol {
            var base: AsyncStream<[Attachment.Record]>.Iterator
            let hub: SessionHub
            /// The next list, or nil once the session is invalidated.
            public mutating func next() async -> [Attachment]? {
                guard let records = await base.next() else { return nil }
                return records.map { Attachment($0, hub: hub) }
            }
        }
    }

    private let hub: SessionHub

    /// The journal of `session`.
    public init<A>(session: GroupSession<A>) { hub = session.hub }

    /// The current list (once joined), then the whole list after each change: added, fetched
    /// further, replicated, unavailable, removed.
    public var attachments: Attachments { Attachments(base: hub.attachmentStream(), hub: hub) }

    /// The attachments now.
    public var currentAttachments: [Attachment] { hub.attachments.map { Attachment($0, hub: hub) } }

    /// Adds `data` with `metadata` (any `Encodable`, ≤ 16 KiB as JSON); returns once every
    /// participant can fetch it.
    @discardableResult
    public func add(_ data: Data, metadata: some Encodable, name: String = "attachment") async throws(HuddleKitError) -> Attachment {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("huddlekit-add-\(getpid())-\(UInt64.random(in: 0...UInt64.max))")
        guard FileManager.default.createFile(atPath: url.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw .ioError("cannot write \(url.path)")
        }
        defer { try? FileManager.default.removeItem(at: url) }
        return try await add(contentsOf: url, metadata: metadata, name: name)
    }

    /// Adds the file at `url` with `metadata`; the node reads it (it must be readable by the node).
    @discardableResult
    public func add(contentsOf url: URL, metadata: some Encodable, name: String? = nil) async throws(HuddleKitError) -> Attachment {
        try hub.requireJoined()
        guard url.isFileURL else { throw .badRequest("\(url) is not a file URL") }
        let path = url.standardizedFileURL.path
        let reply = try await hub.connection.request("attach.add", [
            "path": .string(path), "name": .string(name ?? url.lastPathComponent), "meta": try JSONCoding.json(metadata),
        ], dedicated: true)
        guard let record = reply["attachment"]?.objectValue.flatMap(Attachment.Record.init) else {
            throw .nodeFailed("attach.add answered without an attachment")
        }
        return Attachment(record, hub: hub)
    }

    /// Removes `attachment` for every participant.
    public func remove(attachment: Attachment) async throws(HuddleKitError) {
        try hub.requireJoined()
        _ = try await hub.connection.request("attach.remove", ["id": .string(attachment.id)])
    }
}
