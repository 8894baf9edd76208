import HuddleCore
import HuddleCrypto

/// Effects held until a commit of the data directory's state completes (`Node.execute`).
struct HeldEffects {
    var effects: [SessionEffect]
    /// The commit (`Node.commitsTaken`'s count) they wait for.
    var after: UInt64
    /// For each peer a `sendLink` among them names, the link to it when they were decided (nil:
    /// none). What was meant for a link that closed meanwhile is not sent on the link that took
    /// its place: that link's own link-up (hello, directed messages not acknowledged, in order)
    /// comes first there, and a directed message decided for the old link would overtake the ones
    /// resent before it.
    /// The handle itself, not its `ObjectIdentifier`: a closed link's handle freed while these
    /// wait could have its address reused by the link that replaced it.
    var linkAt: [MemberID: LinkHandle?] = [:]
}

/// What the last completed commit made durable: what may leave without waiting for another.
struct DurablePoint {
    var ownSeq: UInt64 = 0
    var counter: UInt64 = 0
    /// `core.epochs.memoryRevision` it held (nil: none committed yet).
    var epochs: Int?
}

extension Node {
    /// Turns on the data directory's state (CONTROL.md, Restart): from now on every event is
    /// committed (in batches: one transaction for what was appended meanwhile) before subscribers
    /// see it, together with where broadcast stands, and this member's broadcasts before they leave.
    func persist(to store: NodeStateStore) {
        state = store
        if !resumed { events.makeDurable() }
        // Taken up from the state file: durable already.
        durable = DurablePoint(ownSeq: core.resumePoint.ownSeq, counter: core.resumePoint.counter, epochs: resumed ? core.epochs.memoryRevision : nil)
        // The history taken up may be ahead of the key file (a crash between the two writes;
        // the history is written first): the key file follows it, never the other way.
        if let key = core.epochs.current, key.epoch > currentKey.epoch { moveToEpoch(key) }
        if resumed, let by = core.epochs.removedNodes[local.node] {
            log.warning("this node was removed from the session by node \(hexString(by).prefix(16)) before it stopped: it holds no key of the session any more")
        }
        // From inside the event log (which a commit reads): asked for later, from a task, unless
        // the input that appended the event asks first (`commitAskedEvents`).
        events.requestCommit = { [weak self] in
            guard let self else { return }
            self.spawner.spawn { await self.commitAskedEvents() }
        }
        requestCommit()
    }

    /// Asks for a commit of what changed so far; returns the commit (`commitsTaken`'s count) that
    /// will hold it, nil without a data directory or after a commit failed. One commit at a time
    /// runs on the I/O queue (`NodeIO`); what is asked for meanwhile is taken, all at once, when it
    /// completes (a group commit).
    @discardableResult
    func requestCommit() -> UInt64? {
        guard let state, !stateFailed else { return nil }
        if commitInFlight {
            commitWanted = true
            return commitsTaken &+ 1
        }
        takeCommit(state)
        return commitsTaken
    }

    /// Asks for the commit that events appended since the last one wait for, if none did yet: at the
    /// end of an input that appended events (a read's messages), so they are not left for a task
    /// to ask later (a wake-up more on the way of every message, `MessageHop.commit`).
    func commitAskedEvents() {
        if events.commitRequested { requestCommit() }
    }

    /// Takes what changed since the last commit — new events, retention's start, the resume point,
    /// this member's newly stored broadcasts, the parts of the state that changed — and hands it to
    /// the I/O queue. What this member had not yet sent is signed first and held until the commit
    /// completes: a commit never holds a seq (or an event of a message) that a crash could leave
    /// unsent and a restart would give to another message.
    private func takeCommit(_ state: NodeStateStore) {
        let flushed = core.flushBatch()
        let rows = events.takeUncommitted()
        var point = core.resumePoint
        let ownFrom = core.broadcast.ownStoredFrom
        let own = core.broadcast.ownStored(from: max(committedOwnSeq &+ 1, ownFrom))
        // The parts written apart, each only when it changed.
        let revisions = CommittedRevisions(epochs: core.epochs.memoryRevision, journal: core.journal.revision, activity: core.activity.stamp)
        var parts: Set<NodeStateStore.Part> = []
        if revisions.epochs != committedRevisions?.epochs { parts.insert(.epochs); point.epochs = core.epochs.memory }
        if revisions.journal != committedRevisions?.journal { parts.insert(.journal); point.journal = core.journal.memory }
        if revisions.activity != committedRevisions?.activity { parts.insert(.activity); point.activity = core.activity.current }
        // The next commit writes what changed after this one (the I/O queue runs them in order).
        committedOwnSeq = point.ownSeq
        committedIncarnation = point.incarnation
        committedRevisions = revisions
        commitsTaken &+= 1
        commitInFlight = true
        let generation = commitsTaken
        // Behind everything held so far: what asked for this commit (`hold`) was decided before this flush.
        if !flushed.isEmpty { held.append(heldEffects(flushed, after: generation)) }
        let made = DurablePoint(ownSeq: point.ownSeq, counter: point.counter, epochs: revisions.epochs)
        let firstRetained = events.first, lastCursor = events.latest
        let io = self.io, taken = point, changed = parts, metrics = self.metrics
        // The transaction, on the I/O queue; the failure, if any.
        let write: @Sendable (CommitEvents?) -> String? = { frames in
            io.testDelay()
            let started = ContinuousClock.now
            defer { metrics?.commitWritten(ContinuousClock.now - started) }
            do {
                try state.commit(events: frames.map(AnySequence.init) ?? AnySequence([]), firstRetained: firstRetained, lastCursor: lastCursor, point: taken, own: own, ownFrom: ownFrom, parts: changed)
                return nil
            } catch {
                return "\(error)"
            }
        }
        guard let rows, rows.load != nil else {
            // Every event is in memory: straight to the I/O queue, and from there back to this
            // actor. Each hop costs a wake-up on a busy machine, and a message waits for a commit
            // at its sender and again at each receiver (`MessageHop.sendHold`, `.commit`).
            let frames = rows?.framesInMemory()
            io.submit { [self] in
                let failure = write(frames)
                Task { await commitCompleted(generation, made: made, through: lastCursor, failure: failure) }
            }
            return
        }
        let commit: @Sendable () async -> Void = { [self] in
            // The events only in the spool's files are read on its queue, not on the actor.
            let frames = await rows.frames()
            let failure: String?
            do { failure = try await io.run { write(frames) } } catch { failure = "\(error)" }
            await commitCompleted(generation, made: made, through: lastCursor, failure: failure)
        }
        // Once the node's tasks have ended (it stopped), still completed: what waits on it must not hang.
        if !spawner.spawn(commit) { Task(operation: commit) }
    }

    /// A commit completed: its events are shown, what it held leaves, the next one is taken. A
    /// failed commit (a full disk) stops the node without leaving — nothing more is sent or shown
    /// that a restart could not resume from.
    private func commitCompleted(_ generation: UInt64, made: DurablePoint, through cursor: Int64, failure: String?) {
        commitInFlight = false
        if let failure {
            guard !stateFailed else { return }
            stateFailed = true
            held = []
            log.error("cannot save the node state in \(state?.directory ?? "?"): \(failure); stopping without leaving (restart it once the disk is sound)")
            wake(.committed)
            spawner.spawn { [self] in await stop() }
            return
        }
        commitsDone = generation
        durable = made
        events.markDurable(through: cursor)
        if let metrics { hopStamps.appended.done(through: cursor) { metrics.record(.commit, $0) } }
        releaseHeld()
        wake(.committed)
        if commitWanted {
            commitWanted = false
            requestCommit()
        }
    }

    /// Carries out the held effects whose commit completed, in the order they were held.
    private func releaseHeld() {
        releasing = true
        defer { releasing = false }
        while let first = held.first, first.after <= commitsDone {
            held.removeFirst()
            perform(first.linkAt.isEmpty ? first.effects : first.effects.filter { effect in
                guard case let .sendLink(peer, _) = effect, let decidedFor = first.linkAt[peer] else { return true }
                return links[peer] === decidedFor
            })
        }
    }

    /// Whether `effects` must wait for a commit: they carry a broadcast of this member's that no
    /// completed commit holds (its seq or message counter is past the durable ones), or move the
    /// key file to an epoch whose history is not durable yet.
    func needsCommit(_ effects: [SessionEffect]) -> Bool {
        effects.contains { effect in
            switch effect {
            case let .sendToLinks(.batch(batch)), let .sendLink(_, .batch(batch)):
                batch.origin == local.id && batch.messages.contains { $0.message.seq > durable.ownSeq || $0.message.counter > durable.counter }
            case .epochMoved: core.epochs.memoryRevision != durable.epochs
            default: false
            }
        }
    }

    /// Holds `effects` until the commit they need (or, when they need none, until those held
    /// before them went): the events they make here go at once (they are shown only once
    /// committed, `EventLog`), so the commit holds them too, and so do membership datagrams (UDP
    /// keeps no order anyway; a slow disk must not make the others suspect this member); nothing
    /// else of them leaves before.
    func hold(_ effects: [SessionEffect]) {
        let goesNow = { (effect: SessionEffect) in effect.isLocalEvent || effect.isMembershipDatagram }
        let now = effects.filter(goesNow)
        if !now.isEmpty { perform(now) }
        let rest = effects.filter { !goesNow($0) }
        guard !rest.isEmpty else { return }
        var after = held.last?.after ?? commitsDone
        // Their place is taken before the commit is asked for: a commit taken now signs the batch
        // still pending (`takeCommit`) and holds it after what is held, and that batch was made
        // after these were decided. Put after it, a full batch flushed to make room for the next
        // message left behind the batch that next message opened: the directed relay test saw
        // message 667 delivered before 652-666 (a 256 KiB batch of 15), on one link.
        let slot = held.count
        if needsCommit(rest) {
            // A failed commit: nothing of it leaves.
            guard let commit = requestCommit() else { return }
            after = max(after, commit)
        }
        held.insert(heldEffects(rest, after: after), at: slot)
        // Held behind nothing in flight (all before it went): it goes now.
        if !commitInFlight && after <= commitsDone { releaseHeld() }
    }

    /// `effects` held until commit `after`, with the link each `sendLink` among them was decided for.
    private func heldEffects(_ effects: [SessionEffect], after: UInt64) -> HeldEffects {
        var linkAt: [MemberID: LinkHandle?] = [:]
        for case let .sendLink(peer, _) in effects where linkAt[peer] == nil { linkAt[peer] = .some(links[peer]) }
        return HeldEffects(effects: effects, after: after, linkAt: linkAt)
    }

    /// Waits until commit `generation` completed (or failed, or the node stopped).
    func waitForCommit(_ generation: UInt64) async {
        while commitsDone < generation && !stateFailed && mayWait { await wait(for: .committed) }
    }

    /// Stops without leaving (SIGTERM or SIGINT with a data directory): the state is committed,
    /// links close, and the others see this member failed until it comes back.
    func stop() async {
        guard !stopping else { return }
        if let commit = requestCommit() { await waitForCommit(commit) }
        stopping = true
        log.info("stopping (the membership is kept in \(state?.directory ?? "?"); `huddle leave` leaves for good)")
        await closeLinks()
        // A commit taken meanwhile (a read's events, a chained one) that reads the spool's files
        // first reaches the I/O queue only after that read: it is waited for, so the close is
        // handed over after it. No commit is taken after this; the close runs after those
        // handed over before it.
        while commitInFlight && !stateFailed && mayWait { await wait(for: .committed) }
        if let closing = state {
            state = nil
            _ = try? await io.run { closing.close() }
        }
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

    /// Whether this effect sends a membership (SWIM) datagram: nothing of the broadcast's.
    var isMembershipDatagram: Bool {
        if case let .sendDatagram(payload, _, _) = self, case .swim = payload.content { return true }
        return false
    }
}

/// Where the parts of the state written only when they change stood at the last commit taken.
struct CommittedRevisions: Equatable {
    var epochs: Int
    var journal: UInt64
    var activity: ActivityStamp?
}
