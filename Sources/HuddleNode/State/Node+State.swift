import HuddleCore
import HuddleCrypto

extension Node {
    /// Turns on the data directory's state (CONTROL.md, Restart): from now on every event is
    /// committed (in batches: one transaction for what was appended meanwhile) before subscribers
    /// see it, together with where broadcast stands, and this member's broadcasts before they leave.
    func persist(to store: NodeStateStore) {
        state = store
        if !resumed { events.makeDurable() }
        // The history taken up may be ahead of the key file (a crash between the two writes;
        // the history is written first): the key file follows it, never the other way.
        if let key = core.epochs.current, key.epoch > currentKey.epoch { moveToEpoch(key) }
        if resumed, let by = core.epochs.removedNodes[local.node] {
            log.warning("this node was removed from the session by node \(hexString(by).prefix(16)) before it stopped: it holds no key of the session any more")
        }
        events.requestCommit = { [weak self] in
            guard let self else { return }
            self.spawner.spawn { await self.commitState() }
        }
        commitState()
    }

    /// Commits what changed since the last commit: new events, retention's start, the resume
    /// point, this member's newly stored broadcasts, the epoch memory when it changed. False when
    /// the commit failed (a full disk): the node then stops without leaving — nothing more is sent
    /// or shown that a restart could not resume from.
    @discardableResult
    func commitState() -> Bool {
        guard let state else { return true }
        guard !stateFailed else { return false }
        // What this member sent is signed first: a commit never holds a seq (or an event of a
        // message) that a crash could leave unsent and a restart would give to another message.
        let flushed = core.flushBatch()
        let rows = events.uncommitted()
        var point = core.resumePoint
        let ownFrom = core.broadcast.ownStoredFrom
        let own = core.broadcast.ownStored(from: max(committedOwnSeq &+ 1, ownFrom))
        // The parts written apart, each only when it changed.
        let revisions = CommittedRevisions(epochs: core.epochs.memoryRevision, journal: core.journal.revision, activity: core.activity.stamp)
        var parts: Set<NodeStateStore.Part> = []
        if revisions.epochs != committedRevisions?.epochs { parts.insert(.epochs); point.epochs = core.epochs.memory }
        if revisions.journal != committedRevisions?.journal { parts.insert(.journal); point.journal = core.journal.memory }
        if revisions.activity != committedRevisions?.activity { parts.insert(.activity); point.activity = core.activity.current }
        do {
            try state.commit(events: rows, firstRetained: events.first, lastCursor: events.latest, point: point, own: own, ownFrom: ownFrom, parts: parts)
        } catch {
            stateFailed = true
            log.error("cannot save the node state in \(state.directory): \(error); stopping without leaving (restart it once the disk is sound)")
            spawner.spawn { [self] in await stop() }
            return false
        }
        committedOwnSeq = point.ownSeq
        committedIncarnation = point.incarnation
        committedRevisions = revisions
        events.markDurable(through: events.latest)
        if !flushed.isEmpty {
            committing = true
            execute(flushed)
            committing = false
        }
        return true
    }

    /// Write-ahead for effects that carry this member's own batch: the events they make here go
    /// first, then the commit, then what leaves (nothing leaves when the commit failed).
    func executeWritingAhead(_ effects: [SessionEffect]) {
        let local = effects.filter(\.isLocalEvent)
        if !local.isEmpty { execute(local) }
        guard commitState() else { return }
        committing = true
        execute(effects.filter { !$0.isLocalEvent })
        committing = false
    }

    /// Stops without leaving (SIGTERM or SIGINT with a data directory): the state is committed,
    /// links close, and the others see this member failed until it comes back.
    func stop() async {
        guard !stopping else { return }
        commitState()
        stopping = true
        log.info("stopping (the membership is kept in \(state?.directory ?? "?"); `huddle leave` leaves for good)")
        await closeLinks()
        state?.close()
        state = nil
        markStopped()
    }
}

extension SessionEffect {
    /// Whether this effect only makes an event here (a delivery, a member or attachment change).
    var isLocalEvent: Bool {
        switch self {
        case .deliver, .deliverOwn, .deliverUnreliable, .gap, .member, .memberRemoved, .activityChanged, .participants: true
        case .journal(.emit): true
        default: false
        }
    }

    /// Whether this effect sends a batch of `local`'s own broadcasts.
    func sendsOwnBatch(_ local: MemberID) -> Bool {
        switch self {
        case let .sendToLinks(.batch(batch)), let .sendLink(_, .batch(batch)): batch.origin == local
        default: false
        }
    }
}

/// Where the parts of the state written only when they change stood at the last commit.
struct CommittedRevisions: Equatable {
    var epochs: Int
    var journal: UInt64
    var activity: ActivityStamp?
}
