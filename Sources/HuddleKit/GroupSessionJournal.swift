import Foundation
import HuddleControl

/// The session's attachments, as SharePlay's `GroupSessionJournal`: files every participant gets,
/// late joiners included, without the uploader sending them again; each lives as long as some
/// member holds it.
///
/// Guarantees: every participant sees the same attachments (journal entries travel by causal
/// broadcast); `attachments` yields the whole current list when an attachment comes or goes or
/// one's state or completeness changes (never for progress alone: that is `progressUpdates`); an
/// attachment is at most 100 MiB and its metadata at most 16 KiB (`.tooLarge` otherwise).
public final class GroupSessionJournal: Sendable {
    /// SharePlay's name for one attachment of the journal.
    public typealias Attachment = HuddleKit.Attachment

    /// How long `add` waits.
    public enum AddCompletion: Sendable, Equatable {
        /// Until this node has read, chunked and stored the file and announced it to the session:
        /// every participant then lists it and can fetch it from this node while it stays up.
        case announced
        /// Also until every chunk is held by at least two live members (state `.replicated`): it
        /// then survives this node going away. Needs another live member.
        case replicated
    }

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

    /// The current list (once joined), then the whole list after each change: added, removed,
    /// complete here, replicated, unavailable. Chunks arriving are not a change of the list:
    /// follow them with `progressUpdates`.
    public var attachments: Attachments { Attachments(base: hub.attachmentStream(), hub: hub) }

    /// An attachment each time this node holds more of its chunks (or it is added), from now on;
    /// read its `progress`. Ends when the session is invalidated.
    public var progressUpdates: AsyncStream<Attachment> {
        let hub = hub
        return AsyncStream.mapping(hub.progressStream()) { Attachment($0, hub: hub) }
    }

    /// The attachments now.
    public var currentAttachments: [Attachment] { hub.attachments.map { Attachment($0, hub: hub) } }

    /// Adds `data` with `metadata` (any `Encodable`, ≤ 16 KiB as JSON). The bytes are written to a
    /// new file (`open(O_CREAT|O_EXCL, 0600)`, in a directory of its own, mode 0700) that the node
    /// reads, deleted once the node answered. Returns when `until` is reached: `.announced` (the
    /// default) once the node has stored and announced it, `.replicated` once two live members hold
    /// every chunk, or throws `.timeout` after `timeout` (the attachment stays added).
    @discardableResult
    public func add(_ data: Data, metadata: some Encodable, name: String = "attachment", until: AddCompletion = .announced,
                    timeout: Duration = .seconds(60)) async throws(HuddleKitError) -> Attachment {
        let directory = try PrivateDirectory()
        defer { directory.remove() }
        let path = try directory.write(data, to: "attachment")
        return try await add(contentsOf: URL(fileURLWithPath: path), metadata: metadata, name: name, until: until, timeout: timeout)
    }

    /// Adds the file at `url` with `metadata`; the node reads it (it must be readable by the node).
    /// Waits as `add(_:metadata:)` does.
    @discardableResult
    public func add(contentsOf url: URL, metadata: some Encodable, name: String? = nil, until: AddCompletion = .announced,
                    timeout: Duration = .seconds(60)) async throws(HuddleKitError) -> Attachment {
        try await hub.requireJoined()
        guard url.isFileURL else { throw .badRequest("\(url) is not a file URL") }
        let path = url.standardizedFileURL.path
        let updates = hub.attachmentStream()  // made first: the replication may be reported before the reply
        let meta = try JSONCoding.json(metadata)
        let reply = try await hub.connection.request(.attachAdd(path: path, name: name ?? url.lastPathComponent, meta: meta), dedicated: true)
        guard case let .attachment(added) = reply.result else { throw .nodeFailed("attach.add answered without an attachment") }
        let record = Attachment.Record(added)
        let attachment = Attachment(record, hub: hub)
        if until == .replicated, record.state != "replicated" {
            try await Self.waitUntilReplicated(record.id, updates, timeout: timeout)
        }
        return attachment
    }

    private static func waitUntilReplicated(_ id: String, _ updates: AsyncStream<[Attachment.Record]>,
                                            timeout: Duration) async throws(HuddleKitError) {
        let reached = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await list in updates where list.contains(where: { $0.id == id && $0.state == "replicated" }) { return true }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        guard reached else { throw .timeout("attachment \(id) was not replicated within \(timeout)") }
    }

    /// Removes `attachment` for every participant.
    public func remove(attachment: Attachment) async throws(HuddleKitError) {
        try await hub.requireJoined()
        _ = try await hub.connection.request(.attachRemove(id: attachment.id))
    }
}
