import HuddleControl
import Synchronization

/// What one `GroupSession` knows and who listens to it, shared by the session, its messengers and
/// journals (whatever their activity type).
///
/// Guarantees: every event of the node is applied once, in cursor order, by one task; each update
/// sequence sees the values in that order. Events from before `join()` (with `replayingHistory`)
/// deliver their messages but do not change participants, activity or attachments, which come
/// from the node's current answers (`members`, `activity.get`, `attach.list`) taken at `join()`.
final class SessionHub: Sendable {
    let connection: NodeConnection
    let localParticipant: Participant
    let replayingHistory: Bool
    private let shared = Mutex(Shared())

    struct Shared: Sendable {
        var state = GroupSessionState.waiting
        var participants: Set<Participant> = []
        var activity: JSON = .null
        var attachments: [Attachment.Record] = []
        /// Events up to this cursor are history (replayed), not changes.
        var historyUpTo: Int64 = 0
        var joining = false
        var messages = Sinks<InboundMessage>()
        var participantUpdates = Sinks<Set<Participant>>()
        var activityUpdates = Sinks<JSON>()
        var attachmentUpdates = Sinks<[Attachment.Record]>()
        var stateUpdates = Sinks<GroupSessionState>()
        var pump: Task<Void, Never>?
    }

    init(connection: NodeConnection, localParticipant: Participant, replayingHistory: Bool) {
        self.connection = connection
        self.localParticipant = localParticipant
        self.replayingHistory = replayingHistory
    }

    // MARK: reading

    var state: GroupSessionState { shared.withLock { $0.state } }
    var participants: Set<Participant> { shared.withLock { $0.participants } }
    var activity: JSON { shared.withLock { $0.activity } }
    var attachments: [Attachment.Record] { shared.withLock { $0.attachments } }

    func participantStream() -> AsyncStream<Set<Participant>> {
        shared.withLock { $0.participantUpdates.stream(first: $0.state == .waiting ? nil : $0.participants) }
    }
    func activityStream() -> AsyncStream<JSON> {
        shared.withLock { $0.activityUpdates.stream(first: $0.state == .waiting ? nil : $0.activity) }
    }
    func attachmentStream() -> AsyncStream<[Attachment.Record]> {
        shared.withLock { $0.attachmentUpdates.stream(first: $0.state == .waiting ? nil : $0.attachments) }
    }
    func stateStream() -> AsyncStream<GroupSessionState> { shared.withLock { $0.stateUpdates.stream(first: $0.state) } }
    func messageStream() -> AsyncStream<InboundMessage> { shared.withLock { $0.messages.stream(first: nil) } }

    // MARK: joining and leaving

    func join() async throws(HuddleKitError) {
        let first: Bool = try shared.withLock { (s: inout Shared) throws(HuddleKitError) -> Bool in
            switch s.state {
            case .joined: return false
            case let .invalidated(reason): throw reason
            case .waiting:
                if s.joining { throw .badRequest("join() is already under way") }
                s.joining = true
                return true
            }
        }
        guard first else { return }
        do { try await subscribeAndTakeSnapshot() } catch {
            shared.withLock { $0.joining = false }
            throw error
        }
    }

    private func subscribeAndTakeSnapshot() async throws(HuddleKitError) {
        let (cursor, updates) = try await connection.subscribe(since: replayingHistory ? 0 : nil)
        let members = try await connection.request("members")["members"]?.arrayValue ?? []
        let activity = try await connection.request("activity.get")["activity"] ?? .null
        let list = try await connection.request("attach.list")["attachments"]?.arrayValue ?? []
        shared.withLock { s in
            s.historyUpTo = cursor
            for member in members.compactMap(\.objectValue) where Participant.isActive(state: member["state"]?.stringValue) {
                if let p = Participant(member: member) { s.participants.insert(p) }
            }
            s.participants.insert(localParticipant)
            s.activity = activity
            s.attachments = list.compactMap { $0.objectValue.flatMap(Attachment.Record.init) }.filter { !$0.isRemoved }
            s.state = .joined
            s.stateUpdates.yield(.joined)
            s.participantUpdates.yield(s.participants)
            s.activityUpdates.yield(s.activity)
            s.attachmentUpdates.yield(s.attachments)
            s.pump = Task { for await update in updates { self.apply(update) } }
        }
    }

    /// Ends the session here: every update sequence finishes; with `leaveNode`, the node leaves the
    /// session first (CONTROL.md `leave`: it hands off its chunks and exits).
    func end(leaveNode: Bool) async throws(HuddleKitError) {
        var failure: HuddleKitError?
        if leaveNode {
            do { _ = try await connection.request("leave", dedicated: true) } catch { failure = error }
        }
        invalidate(.left)
        await connection.stop()
        if let failure { throw failure }
    }

    func invalidate(_ reason: HuddleKitError) {
        shared.withLock { s in
            if case .invalidated = s.state { return }
            s.state = .invalidated(reason: reason)
            s.stateUpdates.yield(s.state)
            s.stateUpdates.finish()
            s.messages.finish()
            s.participantUpdates.finish()
            s.activityUpdates.finish()
            s.attachmentUpdates.finish()
            s.pump?.cancel()
        }
    }

    /// The session's state must be `joined` for a request that acts on the session.
    func requireJoined() throws(HuddleKitError) {
        switch state {
        case .joined: return
        case .waiting: throw .badRequest("join() the session first")
        case let .invalidated(reason): throw reason
        }
    }

    /// Sets the activity here at once (the node's own event confirms it later).
    func setLocalActivity(_ value: JSON) {
        shared.withLock { s in
            guard s.activity != value else { return }
            s.activity = value
            s.activityUpdates.yield(value)
        }
    }

    // MARK: events

    private func apply(_ update: NodeConnection.Update) {
        switch update {
        case let .ended(reason): invalidate(reason)
        case let .event(event): shared.withLock { apply(event, to: &$0) }
        }
    }

    private func apply(_ event: JSONObject, to s: inout Shared) {
        let live = (event["cursor"]?.intValue ?? 0) > s.historyUpTo
        switch event["event"]?.stringValue {
        case "message":
            guard let text = event["text"]?.stringValue, let (tag, sender, value) = MessageEnvelope.open(text),
                  let from = event["from"]?.stringValue else { return }
            let source = s.participants.first { $0.id == from } ?? Participant(id: from)
            s.messages.yield(InboundMessage(tag: tag, sender: sender, value: value, source: source))
        case "member" where live:
            guard let member = event["member"]?.objectValue, let participant = Participant(member: member) else { return }
            var next = s.participants
            next.remove(participant)
            if Participant.isActive(state: member["state"]?.stringValue) || participant == localParticipant { next.insert(participant) }
            let changed = next != s.participants
            s.participants = next  // also takes a changed name
            if changed { s.participantUpdates.yield(next) }
        case "activity" where live:
            let value = event["activity"] ?? .null
            guard value != s.activity else { return }
            s.activity = value
            s.activityUpdates.yield(value)
        case "attachment" where live:
            guard let record = event["attachment"]?.objectValue.flatMap(Attachment.Record.init) else { return }
            if let i = s.attachments.firstIndex(where: { $0.id == record.id }) {
                if record.isRemoved || event["change"]?.stringValue == "removed" { s.attachments.remove(at: i) } else { s.attachments[i] = record }
            } else if !record.isRemoved {
                s.attachments.append(record)
            } else {
                return
            }
            s.attachmentUpdates.yield(s.attachments)
        default:
            break
        }
    }
}
