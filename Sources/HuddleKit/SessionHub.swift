import Foundation
import HuddleControl
import Synchronization

/// What one `GroupSession` knows and who listens to it, shared by the session, its messengers and
/// journals (whatever their activity type).
///
/// Guarantees: every event of the node is applied once, in cursor order, by one task; each update
/// sequence sees the values in that order. The participants are the programs joined to this
/// activity (`participant` events of the node, issue 38), this program included once joined. Events from before `join()` (with `replayingHistory`)
/// deliver their messages but do not change participants, activity or attachments, which come
/// from the node's current answers (`members`, `activity.get`, `attach.list`) taken at `join()`.
final class SessionHub: Sendable {
    let connection: NodeConnection
    let localParticipant: Participant
    /// The activity this program joins as a participant (its type's `activityIdentifier`).
    let activityType: String
    let replayingHistory: Bool
    private let shared = Mutex(Shared())

    struct Shared: Sendable {
        var state = GroupSessionState.waiting
        var participants: Set<Participant> = []
        var activity: JSON = .null
        var attachments: [Attachment.Record] = []
        /// Events up to this cursor are history (replayed), not changes.
        var historyUpTo: Int64 = 0
        var joinTask: Task<Result<Void, HuddleKitError>, Never>?
        var activation: String?
        var activationSetBy: String?
        var messages = Sinks<InboundMessage>()
        var participantUpdates = Sinks<Set<Participant>>()
        var activityUpdates = Sinks<JSON>()
        var attachmentUpdates = Sinks<[Attachment.Record]>()
        var progressUpdates = Sinks<Attachment.Record>()
        /// Attachments removed since this session joined: a held `Attachment` reads `.removed`.
        var removed: Set<String> = []
        var stateUpdates = Sinks<GroupSessionState>()
        var pump: Task<Void, Never>?
    }

    /// The Huddle session's fingerprint (`status` `session`).
    let sessionFingerprint: String

    init(connection: NodeConnection, localParticipant: Participant, activityType: String, replayingHistory: Bool, sessionFingerprint: String = "") {
        self.sessionFingerprint = sessionFingerprint
        self.connection = connection
        self.localParticipant = localParticipant
        self.activityType = activityType
        self.replayingHistory = replayingHistory
    }

    // MARK: reading

    var state: GroupSessionState { shared.withLock { $0.state } }
    var participants: Set<Participant> { shared.withLock { $0.participants } }
    var activity: JSON { shared.withLock { $0.activity } }
    var attachments: [Attachment.Record] { shared.withLock { $0.attachments } }
    func attachmentRecord(_ id: String) -> Attachment.Record? { shared.withLock { s in s.attachments.first { $0.id == id } } }
    func isRemoved(_ id: String) -> Bool { shared.withLock { $0.removed.contains(id) } }
    func progressStream() -> AsyncStream<Attachment.Record> { shared.withLock { $0.progressUpdates.stream(first: nil) } }

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

    /// The activation this session belongs to ("" when set without an id, nil for a session made
    /// with `connect`), and the member that set it.
    var activation: String? { shared.withLock { $0.activation } }
    var activationSetBy: String? { shared.withLock { $0.activationSetBy } }

    /// Takes the activity value a `sessions()` sequence yielded this session for.
    func adopt(activity: JSON, activation: String, setBy: String?) {
        shared.withLock { s in
            s.activity = activity
            s.activation = activation
            s.activationSetBy = setBy
        }
    }

    /// Starts joining (once) and returns the task that finishes it: what `join()` starts and
    /// `joinAndWait()` and every request acting on the session wait for.
    func startJoining() -> Task<Result<Void, HuddleKitError>, Never> {
        shared.withLock { s in
            if let task = s.joinTask { return task }
            let task = Task { () -> Result<Void, HuddleKitError> in
                do throws(HuddleKitError) {
                    try await self.subscribeAndTakeSnapshot()
                    return .success(())
                } catch {
                    self.invalidate(error)
                    return .failure(error)
                }
            }
            s.joinTask = task
            return task
        }
    }

    func join() async throws(HuddleKitError) {
        if case let .invalidated(reason) = state, shared.withLock({ $0.joinTask == nil }) { throw reason }
        try await startJoining().value.get()
    }

    private func subscribeAndTakeSnapshot() async throws(HuddleKitError) {
        let (cursor, updates) = try await connection.subscribe(since: replayingHistory ? 0 : nil)
        try await connection.joinAsParticipant(activity: activityType, program: localParticipant.id)
        let participants = try await liveParticipants()
        guard case let .activity(activity, _) = try await connection.request(.activityGet).result,
              case let .attachments(list) = try await connection.request(.attachList).result
        else { throw .nodeFailed("the node answered activity.get or attach.list with another reply") }
        shared.withLock { s in
            s.historyUpTo = cursor
            s.participants = participants
            if let mine = s.activation, ActivityValue.isEnded(activity), activity.objectValue?["activation"]?.stringValue ?? "" == mine {
                invalidateLocked(.ended, &s)
                return
            }
            s.activity = activity
            s.attachments = list.map(Attachment.Record.init).filter { !$0.isRemoved }
            guard s.state == .waiting else { return }
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
            do { _ = try await connection.request(.leave(timeoutMs: nil), dedicated: true) } catch { failure = error }
        }
        invalidate(.left)
        await connection.stop()
        if let failure { throw failure }
    }

    /// Ends the session here with `reason`; with `closing` (the default) its control connections
    /// close too, so this program is no participant any more (`end()` closes them itself, once the
    /// ended value is sent).
    func invalidate(_ reason: HuddleKitError, closing: Bool = true) {
        shared.withLock { invalidateLocked(reason, &$0, closing: closing) }
    }

    private func invalidateLocked(_ reason: HuddleKitError, _ s: inout Shared, closing: Bool = true) {
        if case .invalidated = s.state { return }
        s.state = .invalidated(reason: reason)
        s.stateUpdates.yield(s.state)
        s.stateUpdates.finish()
        s.messages.finish()
        s.participantUpdates.finish()
        s.activityUpdates.finish()
        s.attachmentUpdates.finish()
        s.progressUpdates.finish()
        s.pump?.cancel()
        // Over, for whatever reason (an end() anywhere included): this program is no participant any more.
        guard closing else { return }
        let connection = connection
        Task { await connection.stop() }
    }

    /// The programs joined to this activity now, as the node knows them, this one included.
    func liveParticipants() async throws(HuddleKitError) -> Set<Participant> {
        guard case let .participants(list) = try await connection.request(.participants(activity: activityType)).result else {
            throw .nodeFailed("the node answered participants with another reply")
        }
        return Set(list.map(Participant.init)).union([localParticipant])
    }

    /// The participant that sent a message: program `sender` on `member` (as HuddleKit's envelope
    /// names its program), or a participant made of those when it is not (or no longer) listed.
    func participant(program sender: UInt64, member: String, in participants: Set<Participant>) -> Participant {
        let id = Participant.programID(sender)
        return participants.first { $0.id == id && $0.member == member } ?? Participant(id: id, member: member)
    }

    /// The session's state must be `joined` for a request that acts on the session; a join under
    /// way (`join()` returns before it is done) is waited for.
    func requireJoined() async throws(HuddleKitError) {
        switch state {
        case .joined: return
        case .waiting:
            guard let task = shared.withLock({ $0.joinTask }) else { throw .badRequest("join() the session first") }
            try await task.value.get()
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
            // Any member may send any bytes: only a well-formed envelope reaches a messenger.
            guard let b64 = event["data"]?.stringValue, let body = Data(base64Encoded: b64),
                  let (kind, tag, sender, recipients, payload) = MessageEnvelope.open(Array(body)),
                  let from = event["from"]?.stringValue else { return }
            // A directed send reaches the recipients' nodes: only the programs it names get it.
            if !recipients.isEmpty {
                guard let mine = localParticipant.program, recipients.contains(mine) else { return }
            }
            let source = participant(program: sender, member: from, in: s.participants)
            s.messages.yield(InboundMessage(kind: kind, tag: tag, sender: sender, payload: payload, source: source))
        case "participant" where live:
            // Programs joining and leaving this activity on any node (the node tells only what the
            // member it is about signed); this program stays until it leaves.
            guard let object = event["participant"]?.objectValue, object["activity"]?.stringValue == activityType,
                  let participant = Participant(participant: object), participant != localParticipant else { return }
            var next = s.participants
            if event["change"]?.stringValue == "joined" { next.insert(participant) } else { next.remove(participant) }
            guard next != s.participants else { return }
            s.participants = next
            s.participantUpdates.yield(next)
        case "activity" where live:
            let value = event["activity"] ?? .null
            guard value != s.activity else { return }
            // A participant ended this session's activation (`GroupSession.end()`): over for everyone.
            if ActivityValue.isEnded(value), case let mine = s.activation ?? s.activity.objectValue?["activation"]?.stringValue ?? "",
               value.objectValue?["activation"]?.stringValue ?? "" == mine {
                s.activity = value
                invalidateLocked(.ended, &s)
                return
            }
            s.activity = value
            s.activityUpdates.yield(value)
        case "attachment" where live:
            guard let record = event["attachment"]?.objectValue.flatMap(Attachment.Record.init) else { return }
            let removal = record.isRemoved || event["change"]?.stringValue == "removed"
            if removal { s.removed.insert(record.id) }
            // The list is yielded when an attachment comes or goes or its state or completeness
            // changes; chunks arriving (progress) go to the progress stream alone.
            var listChanged = true
            if let i = s.attachments.firstIndex(where: { $0.id == record.id }) {
                let old = s.attachments[i]
                if removal {
                    s.attachments.remove(at: i)
                } else {
                    s.attachments[i] = record
                    listChanged = old.state != record.state || old.complete != record.complete
                }
                if old.have != record.have { s.progressUpdates.yield(record) }
            } else if !removal {
                s.attachments.append(record)
                s.progressUpdates.yield(record)
            } else {
                return
            }
            if listChanged { s.attachmentUpdates.yield(s.attachments) }
        default:
            break
        }
    }
}
