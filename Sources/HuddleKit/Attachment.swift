import Foundation
import HuddleControl

/// One file in the session's journal, as `GroupSessionJournal.attachments` lists it (SharePlay's
/// `GroupSessionJournal.Attachment`).
///
/// Guarantees: `id` is the same at every participant (the hash of the attachment's manifest);
/// `state`, `isComplete` and `progress` are read when asked, from the latest the session heard (a
/// value held since it was listed never goes stale; once removed, `state` is `.removed`); `load`
/// returns the bytes exactly as added, fetching the chunks this node does not hold yet from
/// whichever members hold them; two values are equal when they name the same attachment.
public struct Attachment: Identifiable, Hashable, Sendable {
    /// How far the journal has the attachment (CONTROL.md attachment `state`).
    public enum State: String, Sendable {
        /// Only the uploader holds all of it.
        case announced
        /// Every chunk is held by at least two live members.
        case replicated
        /// Some chunk has no live holder: it cannot be loaded until one comes back.
        case unavailable
        /// Removed from the journal.
        case removed
    }

    /// What the node says about an attachment (the control protocol's attachment object).
    struct Record: Sendable, Equatable {
        let id: String
        let name: String
        let size: Int64
        let meta: JSON
        let from: String
        let chunks: Int64
        let have: Int64
        let complete: Bool
        let state: String
        var isRemoved: Bool { state == "removed" }

        init(_ a: ControlAttachment) {
            id = a.id
            name = a.name
            size = a.size
            meta = a.meta
            from = a.from
            chunks = a.chunks
            have = a.have
            complete = a.complete
            state = a.state
        }

        /// The attachment an event's object describes; nil when it is not one (`ControlAttachment`).
        init?(_ o: JSONObject) {
            guard let a = try? ControlAttachment(o) else { return nil }
            self.init(a)
        }
    }

    let record: Record
    let hub: SessionHub

    init(_ record: Record, hub: SessionHub) {
        self.record = record
        self.hub = hub
    }

    /// The attachment id: the same at every participant.
    public var id: String { record.id }
    /// The name it was added with.
    public var name: String { record.name }
    /// Its size in bytes.
    public var size: Int64 { record.size }
    /// The participant that added it: this program when its node did, else the program (lowest
    /// id) joined on the node that did, else one made of that node's member id.
    public var uploader: Participant {
        let here = hub.participants.filter { $0.member == record.from }
        return here.contains(hub.localParticipant) ? hub.localParticipant : here.min { $0.id < $1.id } ?? Participant(id: "", member: record.from)
    }
    /// The latest record the session has for it (the one it was made from until the session hears more).
    private var current: Record { hub.attachmentRecord(id) ?? record }
    /// Where the journal has it now.
    public var state: State { hub.isRemoved(id) ? .removed : State(rawValue: current.state) ?? .announced }
    /// Whether this participant's node holds every chunk now (loading it then needs no network).
    public var isComplete: Bool { current.complete }
    /// The fraction of its chunks this node holds now, from 0 to 1 (1 for an empty attachment).
    public var progress: Double { let r = current; return r.chunks == 0 ? 1 : Double(r.have) / Double(r.chunks) }

    /// The metadata it was added with, decoded as `T` (in DrawTogether, where the image lies).
    public func loadMetadata<T: Decodable>(of type: T.Type) async throws(HuddleKitError) -> T {
        try JSONCoding.decode(T.self, from: record.meta)
    }

    /// Its bytes, waiting up to `timeout` for the chunks this node does not hold yet.
    public func load(_ type: Data.Type, timeout: Duration = .seconds(60)) async throws(HuddleKitError) -> Data {
        let directory = try PrivateDirectory()
        defer { directory.remove() }
        let url = URL(fileURLWithPath: directory.file("attachment"))
        try await load(to: url, timeout: timeout)
        do { return try Data(contentsOf: url) } catch { throw .ioError("cannot read \(url.path): \(error.localizedDescription)") }
    }

    /// Writes its bytes to the file `url` (whole: a temporary file, then a rename), waiting up to
    /// `timeout` for the chunks this node does not hold yet (at least 1 ms, at most 2^31 − 1 ms,
    /// about 24.8 days: a longer timeout waits that long).
    public func load(to url: URL, timeout: Duration = .seconds(60)) async throws(HuddleKitError) {
        guard url.isFileURL else { throw .badRequest("\(url) is not a file URL") }
        let ms = Int64(min(max(timeout / .milliseconds(1), 1), Double(Int32.max)))  // a timeout of any size cannot trap
        _ = try await hub.connection.request(.attachGet(id: id, path: url.standardizedFileURL.path, wait: true, timeoutMs: ms, mode: nil),
                                             dedicated: true)
    }

    /// Equal when they name the same attachment (their state is read live, so it is not compared).
    public static func == (a: Attachment, b: Attachment) -> Bool { a.record.id == b.record.id }
    /// Hashes the id.
    public func hash(into hasher: inout Hasher) { hasher.combine(record.id) }
}
