import Logging
import Foundation
import HuddleControl
import HuddleCore
import HuddleCrypto
import NIOCore
import Synchronization

/// The secrets a node proves itself with on every link: its identity, and the session key it
/// started with (the key of the current epoch is `Node.currentKey`, which moves on with the session).
struct LinkSecurity: Sendable {
    let sessionKey: SessionKey
    let identity: Identity
}

/// One running member: it owns the protocol cores and executes what they decide over links,
/// datagrams and the control socket. All mutable state lives in this actor.
actor Node {
    nonisolated let local: MemberInfo
    nonisolated let security: LinkSecurity
    nonisolated let config: NodeConfiguration
    nonisolated let counters = NodeCounters()
    nonisolated let log: Logger
    nonisolated let spawner = TaskSpawner()
    /// The wall clock the core is given (the system's; offset by a test-only knob: `WallClock`).
    nonisolated let wallClock = WallClock()
    nonisolated let datagramOutbox = Outbox<AddressedEnvelope<ByteBuffer>>()
    /// The Prometheus series (`--metrics`), nil when they are not served.
    nonisolated let metrics: NodeMetrics?
    /// The session-key datagram seal of the current epoch (issue 21: it moves with the epoch).
    var seal: DatagramSeal
    /// The key of the epoch the session is on here; `config.keyPath` holds it.
    var currentKey: SessionKey
    /// What the UDP receive thread opens datagrams with: the session key and the links' keys.
    nonisolated let datagramOpener: DatagramOpenerBox
    /// `core.datagramKeys.generation` when `datagramOpener` was last replaced.
    private var publishedKeys: UInt64 = 0
    let started = ContinuousClock.now

    /// Every protocol decision (HuddleCore's `SessionCore`); the node executes its effects.
    var core: SessionCore
    /// Tasks waiting for something to happen on the node (`wait(for:until:)`).
    var waiters: [WaitReason: [Waiter]] = [:]
    var nextWaiterID: UInt64 = 0
    /// Joins waiting for the dial to an address to end (`link(to:)`); each dial ends (a connect
    /// times out), and a stop ends them all.
    var dialWaiters: [String: [CheckedContinuation<MemberID, any Error>]] = [:]
    /// The shared shell's state for this member (`SessionShell`: dials in flight, the scheduled
    /// flush, when each link came up, the last tick).
    var shellState = ShellState()
    /// The timer's one sleeper (`armTimer`): an arming for an earlier time cancels the one before.
    var timerSleeper: Task<Void, Never>?
    nonisolated let store: ChunkStore
    /// Attachments whose stored copy is being checked against their hashes (`verifyStoredCopy`).
    var verifying: Set<String> = []
    var links: [MemberID: LinkHandle] = [:]
    /// This member's ends of circuits through relays, by peer (`Node+Circuits`).
    var circuitEnds: [MemberID: CircuitEnd] = [:]
    /// Bytes from relays waiting for the links over those circuits, across all of them.
    let circuitQueue = CircuitQueue()
    /// The listening socket's address: hole-punching dials leave from it (`Node+Punch`).
    var punchSource: SocketAddress?
    /// `--join` addresses not answered yet: since when, and the last failure (`Node+Diagnose`).
    var joinFailures: [String: (since: ContinuousClock.Instant, error: String)] = [:]
    /// The test-only corruption of relayed bytes (`RelayCorruption`; off unless its variable is set).
    var relayCorruption = RelayCorruption()
    var events: EventLog
    private var spoolFailureLogged = false
    var datagramAddresses: [String: SocketAddress] = [:]
    var stopping = false
    private(set) var stopped = false
    /// Member events emitted, by change (what metrics report as suspicions, failures, ...).
    var memberEvents: [MemberChange: Int] = [:]
    /// `swim.probeCounts.acked` when `tick` last fed the probe round trip to `metrics`.
    private var probesAckedSeen = 0
    /// While `linkReceived` handles a batch: when its frames arrived (delivery latency), and when
    /// this actor took them (`MessageHop.core`).
    var batchArrived: ContinuousClock.Instant?
    var batchTaken: ContinuousClock.Instant?
    /// With `--metrics`: when this member's broadcasts were made and message events appended,
    /// until they leave or are shown (`MessageHop.sendHold`, `.commit`).
    var hopStamps = HopStamps()

    /// The data directory's state (`--data-dir`; CONTROL.md, Restart), nil without one.
    var state: NodeStateStore?
    /// What the last commit taken of `state` holds: this member's seq and incarnation.
    var committedOwnSeq: UInt64 = 0
    var committedIncarnation: UInt64 = 0
    /// Where the epoch memory, the journal and the activity value stood when last written (nil: never).
    var committedRevisions: CommittedRevisions?
    /// A commit failed: the node is stopping, nothing more is committed.
    var stateFailed = false
    /// This run resumed a membership from its data directory (`status.resumed`).
    nonisolated let resumed: Bool
    /// Set once the node left the session for good (`leave`): its data directory's state is wiped on exit.
    nonisolated let leftForGood = Mutex(false)
    /// The data directory's writes and the key file's (`NodeIO`): never on this actor.
    nonisolated let io = NodeIO()
    /// The origins' node keys a link's reader checks batches with (`checkSignatures`).
    nonisolated let originNodeKeys = OriginNodeKeys()
    /// Commits taken (handed to `io`) and completed, counted from 1 (`requestCommit`).
    var commitsTaken: UInt64 = 0
    var commitsDone: UInt64 = 0
    /// A commit is on the I/O queue; `commitWanted`: another is to be taken when it completes.
    var commitInFlight = false
    var commitWanted = false
    /// What the last completed commit holds: what may leave without waiting for one.
    var durable = DurablePoint()
    /// Effects waiting for a commit, in the order they were decided (`hold`).
    var held: [HeldEffects] = []
    /// `releaseHeld` is carrying out held effects (what they start runs inline, not behind later ones).
    var releasing = false
    /// Most effect lists held before links stop being read until the commit completes.
    static let heldLimit = 1024
    /// Most of this member's messages made but not yet committed before `send` waits for the commit.
    static let uncommittedSendLimit: UInt64 = 2048
    /// The programs each control connection joined as participants: gone when it closes.
    var programsByConnection: [ObjectIdentifier: Set<UInt64>] = [:]

    /// `resume`: what a previous run on the same data directory committed (the member `local`
    /// names, at a higher incarnation), taken up before anything else happens.
    init(local: MemberInfo, security: LinkSecurity, config: NodeConfiguration, store: ChunkStore, metrics: NodeMetrics? = nil, resume: NodeStateStore.Loaded? = nil) {
        self.local = local
        self.metrics = metrics
        self.store = store
        self.security = security
        self.config = config
        shellState.linkBudget.stallSeconds = config.linkStallSeconds
        log = NodeLogHandler.logger(name: local.name)
        // Beside the chunk store, in the data directory (its segment files are unlinked at once).
        events = EventLog(spoolDirectory: (store.root as NSString).deletingLastPathComponent)
        seal = DatagramSeal(key: security.sessionKey.subkey(.datagram))
        currentKey = security.sessionKey
        var epochSettings = EpochSettings()
        epochSettings.grace = config.rekeyGrace
        var limits = SessionCore.Limits()
        limits.reliable = config.maxMessageBytes
        limits.unreliable = config.maxUnreliableBytes
        limits.members = config.maxMembers
        limits.storeBytes = config.storeLimitBytes
        limits.ackDeadline = config.ackDeadlineSeconds
        core = SessionCore(local: local, identity: security.identity, limits: limits, joining: !config.join.isEmpty && resume == nil, swimSeed: SecureRandom.uint64(), journalSeed: SecureRandom.uint64(),
                           sessionKey: security.sessionKey, epochSettings: epochSettings)
        resumed = resume != nil
        if let resume {
            core.resume(from: resume.point, ownMessages: resume.own)
            events.restore(resume.events, lastCursor: resume.lastCursor)
            committedOwnSeq = resume.point.ownSeq
        }
        core.rotate(every: config.rekeyEvery, now: 0)
        core.setRelayBudget(config.relayBudget)
        datagramOpener = DatagramOpenerBox(DatagramOpener(local: local.id, session: seal, keys: core.datagramKeys))
    }

    /// Hands the receive thread an opener with the current link keys, when they changed (or, with
    /// `force`, the epoch did): session-key datagrams open under the current epoch's key and the
    /// newest earlier ones within the grace.
    func publishDatagramKeys(force: Bool = false) {
        guard force || core.datagramKeys.generation != publishedKeys else { return }
        publishedKeys = core.datagramKeys.generation
        datagramOpener.replace(with: DatagramOpener(local: local.id, session: seal, keys: core.datagramKeys, older: core.olderDatagramSeals(now: now)))
    }

    /// The keys a link handshake may use now, the current epoch's first (`SessionCore.handshakeKeys`).
    func handshakeKeys() -> [SessionKey] { core.handshakeKeys(now: now) }

    /// The keys a dial tries in turn (`SessionCore.dialKeys`).
    func dialKeys() -> [SessionKey] { core.dialKeys(now: now) }

    /// Seconds since the node started: the time the protocol cores see.
    var now: Double {
        (ContinuousClock.now - started) / .seconds(1)
    }

    /// The moment `seconds` on the node's clock (`now`) falls at; clamped between the start and a
    /// day from now, so no value can trap the conversion.
    func instant(at seconds: Double) -> ContinuousClock.Instant {
        let clamped = min(max(seconds.isFinite ? seconds : 0, 0), now + 86_400)
        // Rounded up: a timer that wakes even a microsecond early would find nothing due yet.
        return started + .nanoseconds(Int64((clamped * 1e9).rounded(.up)))
    }

    /// The cores, read-only, for what the node reports.
    var swim: SWIMInstance { core.swim }
    var broadcast: CausalBroadcast { core.broadcast }
    var activity: ActivityRegister { core.activity }
    var journal: Journal { core.journal }

    /// Members that count as in the session: alive or merely suspected.
    func isLive(_ member: MemberID) -> Bool { core.isLive(member) }

    var liveCount: Int { core.live.count }

    // MARK: links

    /// Adds an authenticated link and its datagram keys, as the core decides (`linkEstablished`,
    /// whose link-up sequence this runs): the decision, or nil when the node is stopping. Unless
    /// admitted the link must be closed (refused; or a losing duplicate, whose keys are still kept
    /// for a moment, retired). `nodeKey`: the node key the handshake proved; `keyHead`: the epoch
    /// whose key it proved.
    func register(_ link: LinkHandle, nodeKey: [UInt8], datagramKeys: PairDatagramKeys, keyHead: [UInt8]) -> LinkDecision? {
        guard !stopping else { return nil }
        let candidate = LinkCandidate(peer: link.peer, nodeKey: nodeKey, keyHead: keyHead, datagramKeys: datagramKeys, dialer: link.dialer, via: link.via,
                                      remote: link.via == nil ? link.channel.remoteAddress.map(hostPort) ?? "" : "",
                                      local: link.via == nil ? link.channel.localAddress.map(hostPort) ?? "" : "")
        // The link's datagram keys go to the receive thread with the link, before its hello.
        let decision = shell.linkEstablished(candidate, install: { links[link.peer.id] = link; publishDatagramKeys() })
        switch decision {
        case let .refused(reason): logLinkRefusal(reason, link)
        case .duplicate, .admitted: publishDatagramKeys()
        }
        return decision
    }

    /// The first link refused for each reason is logged (a peer can repeat them; all are counted).
    private func logLinkRefusal(_ refusal: CoreError, _ link: LinkHandle) {
        switch refusal.code {
        case .linkToSelf: log.warning("refused a link to ourselves at \(link.remoteAddress)")
        case let .linkRefusedByEpoch(reason):
            if core.refusals[reason] == 1 { log.warning("refused a link from \(link.remoteAddress) (node \(hexString(link.peer.node).prefix(16))): \(reason.rawValue); further ones are counted in stats.refused") }
        case .anotherNodeKey:
            if core.refusals[.linkForPinnedMember] == 1 { log.warning("refused a link from \(link.remoteAddress): member \(link.peer.id) is pinned to another node key; further ones are counted in stats.refused") }
        case .recordNamesAnotherNodeKey:
            if core.refusals[.recordNodeKey] == 1 { log.warning("refused a link from \(link.remoteAddress): \(refusal.message); further ones are counted in stats.refused") }
        case .tooManyStrangers:
            if core.refusals[.strangerLinks] == 1 { log.warning("refused a link from \(link.remoteAddress): \(SessionCore.strangerLinkLimit) links from non-members are up; further ones are counted in stats.refused") }
        case .hostnameAddress:
            if core.refusals[.hostnameAddress] == 1 { log.warning("refused a link from \(link.remoteAddress): its record's address is not a numeric host:port; further ones are counted in stats.refused") }
        default: break  // left, or no circuit for a relayed link
        }
    }

    /// A read's worth of messages from a link, on the link's reader: its batches' signatures are
    /// checked there (`checkSignatures`), off the actor. `arrived` is taken by the caller, before
    /// the hop onto this actor (a default argument is evaluated at the call site).
    nonisolated func linkReceived(_ link: LinkHandle, _ messages: [LinkMessage], arrived: ContinuousClock.Instant = .now) async {
        let checked = checkSignatures(messages)
        await receive(link, messages, checked: checked, arrived: arrived)
    }

    private func receive(_ link: LinkHandle, _ messages: [LinkMessage], checked: [CheckedSignature], arrived: ContinuousClock.Instant) async {
        // A slow commit: once `heldLimit` effect lists wait for it, the link's reader waits for the
        // commit (as it waited for this actor when commits ran on it) rather than what is held
        // growing without bound.
        while held.count >= Self.heldLimit && commitInFlight && !stateFailed && mayWait { await wait(for: .committed) }
        await waitForEventWriter()
        guard links[link.peer.id] === link else { return }
        batchArrived = arrived
        let taken: ContinuousClock.Instant? = metrics == nil ? nil : .now
        batchTaken = taken
        if let metrics, let taken {
            if messages.contains(where: { if case .batch = $0 { true } else if case .message = $0 { true } else { false } }) { metrics.record(.linkRead, taken - arrived) }
        }
        defer { batchArrived = nil; batchTaken = nil }
        events.beginDeferring()
        if !checked.isEmpty { core.signaturesChecked(checked) }
        defer { learnOriginNodeKeys(messages) }
        for message in messages {
            handle(message, on: link)
            // A relayed circuit over its budget: the link's reader waits (`paceCircuits`).
            if case .circuitData = message {
                await paceCircuits(from: link)
                guard links[link.peer.id] === link else { break }
                // Another read may have run meanwhile and cleared this one's times.
                (batchArrived, batchTaken) = (arrived, taken)
            }
        }
        events.endDeferring()
        commitAskedEvents()
    }

    private func handle(_ message: LinkMessage, on link: LinkHandle) {
        shell.receiveLink(message, from: link.peer.id, addr: link.peer.addr)
        switch message {
        case let .pushPullReply(state) where !state.more: wake(.pushPullReply(link.peer.id))
        case .have: wake(.handOff)
        case .epochHead: wake(.epoch)
        case .timeReply: wake(.timing)
        default: break
        }
    }

    func linkClosed(_ link: LinkHandle) {
        let peer = link.peer.id
        guard links[peer] === link else { return }
        links[peer] = nil
        wake(.pushPullReply(peer))
        wake(.handOff)
        wake(.linkClosed)
        shell.linkClosed(peer, stopping: stopping)
    }

    /// Exchanges full membership state with `peer` over its link and waits up to 10 s for the
    /// answer: how a joiner learns the session from its sponsor. False when no link to `peer` was
    /// up, or it closed before the answer came.
    func pushPullAndWait(_ peer: MemberID, join: Bool) async -> Bool {
        guard links[peer] != nil else { return false }
        shell.sendPushPull(to: peer, join: join)
        await wait(for: .pushPullReply(peer), until: .now + .seconds(10))
        return links[peer] != nil
    }

    /// Carries out what the session core decided. With a data directory, write-ahead: this
    /// member's broadcasts leave only once a commit holds them (a restart never reuses a seq a
    /// peer may have), and the key file moves only once the epoch history is committed; effects
    /// that must wait are held, with every effect decided after them (`hold`), while the commit
    /// runs on the I/O queue and this actor goes on.
    func execute(_ effects: [SessionEffect]) {
        // Whatever the input was, the timer is armed for when the core next has work.
        defer { shell.rearm() }
        if state != nil, (!held.isEmpty && !releasing) || needsCommit(effects) {
            hold(effects)
            return
        }
        perform(effects)
    }

    /// Carries out `effects` now (the shared shell, `SessionShell.perform`).
    func perform(_ effects: [SessionEffect]) {
        shell.perform(effects)
        publishDatagramKeys()
        if let metrics { ownBatchesLeft(effects, metrics) }
    }

    /// `MessageHop.sendHold`: this member's broadcasts in `effects` left for the links (a batch to
    /// every link, or one per link when it carries directed messages too). A broadcast whose
    /// batch found no link is timed when a later batch leaves: it waited until then.
    private func ownBatchesLeft(_ effects: [SessionEffect], _ metrics: NodeMetrics) {
        for effect in effects {
            switch effect {
            case let .sendToLinks(.batch(batch)), let .sendLink(_, .batch(batch)):
                guard batch.origin == local.id, let last = batch.messages.last?.message.seq else { continue }
                hopStamps.made.done(through: last) { metrics.record(.sendHold, $0) }
            default: continue
            }
        }
    }

    /// This member's ports for the shared shell; used only on this actor.
    var shell: NodeShell { NodeShell(node: self) }

    /// The flush the shared shell scheduled (`SessionShell.scheduleFlush`), unless the end of a
    /// control visit flushed already (`flushAfterVisit`).
    func flushScheduledBatch() {
        guard shellState.flushScheduled else { return }
        shell.flushNow()
    }

    /// At the end of a control visit (a read's requests): the flush its sends scheduled runs now,
    /// not from the task `scheduleFlush` started (a wake-up more before a message leaves,
    /// `MessageHop.sendHold`); that task finds nothing scheduled then, or flushes what a later
    /// input added. The batch holds the visit's messages not flushed already (a send that waited,
    /// for a commit or congestion, let another flush run). Not with the test-only flush delay,
    /// which exists to hold the flush back.
    func flushAfterVisit() {
        guard shellState.flushScheduled, FlushDelay.value == nil else { return }
        shell.flushNow()
    }

    /// Opens a link to `addr` (`SessionShell.startDial`: the shared shell made sure no other dial
    /// to it is in flight) and reports the end to the shared shell.
    func dialInBackground(_ addr: String) {
        guard !stopping else { return dialFinished(addr, .failure(NodeError("the node is stopping"))) }
        let spawned = spawner.spawn { [self] in
            let outcome: Result<MemberID, any Error>
            do {
                outcome = .success(try await dial(addr))
            } catch {
                log.info("could not link to \(addr): \(error)")
                outcome = .failure(error)
            }
            await dialFinished(addr, outcome)
        }
        // A spawner that has finished (the node stopped) runs nothing: the dial ends here.
        if !spawned { dialFinished(addr, .failure(NodeError("the node is stopping"))) }
    }

    /// A dial ended: the joins waiting for it (`link(to:)`) are told first, then the shared shell.
    private func dialFinished(_ addr: String, _ outcome: Result<MemberID, any Error>) {
        for waiter in dialWaiters.removeValue(forKey: addr) ?? [] { waiter.resume(with: outcome) }
        shell.dialFinished(addr, peer: try? outcome.get())
    }

    /// The member at `addr` (a numeric `host:port`), linked: dialed through the shared shell, which
    /// dials an address once at a time (a join waits for a dial already in flight rather than
    /// making a second). The handshake proves who is there, so no record's claim to the address
    /// is taken instead; a member already linked ends the dial as a duplicate, its link kept.
    /// Throws why the dial failed, or why the link was refused.
    func link(to addr: String) async throws -> MemberID {
        try await withCheckedThrowingContinuation { continuation in
            guard !stopped else { return continuation.resume(throwing: NodeError("the node has stopped")) }
            dialWaiters[addr, default: []].append(continuation)
            shell.dial(addr, pushPull: nil)
        }
    }

    /// Drives membership and link upkeep (the timer fired); the shared shell arms the timer again.
    func tick() {
        let now = self.now
        core.setWallClock(wallClock.now(), now: now)
        shell.tick()
        recordProbeRoundTrip()
        if state != nil, core.swim.local.incarnation != committedIncarnation { requestCommit() }
        if !spoolFailureLogged, let failure = events.spoolFailure {
            spoolFailureLogged = true
            log.warning("\(failure): events before it can no longer be replayed with since (live subscribers still get every event)")
        }
    }

    /// The timer (the shared shell's `wakeAt` port): one sleeper that ticks at `time` if the timer
    /// is still armed for it then (`ShellState.armedWake`); arming it again cancels the sleeper
    /// before, so however often inputs bring the time forward, one task sleeps. Nothing ticks once
    /// the node has stopped.
    func armTimer(at time: Double) {
        timerSleeper?.cancel()
        timerSleeper = nil
        guard !stopped else { return }
        let instant = instant(at: time)
        // A task per arming (about as many as ticks): not the spawner's, whose waits would cost
        // more than the tick itself on an idle node.
        timerSleeper = Task { [self] in
            do { try await Task.sleep(until: instant, clock: .continuous) } catch { return }
            timerFired(armedFor: time)
        }
    }

    private func timerFired(armedFor time: Double) {
        guard !stopped, shellState.armedWake == time else { return }
        // Woken before its time (the clock's rounding): sleep the rest rather than tick for nothing.
        guard now >= time else { return armTimer(at: time) }
        tick()
    }

    /// Feeds the round trip of the probe acked since the last tick to `metrics`. At most one is:
    /// a probe starts only on a tick, after the previous one ended.
    private func recordProbeRoundTrip() {
        guard let metrics else { return }
        let probes = core.swim.probeCounts
        guard probes.acked != probesAckedSeen else { return }
        probesAckedSeen = probes.acked
        // Seconds of this member's own clock; clamped so no value can trap the conversion.
        metrics.probeRoundTrip.recordNanoseconds(Int64(min(max(probes.lastRoundTrip, 0), 3600) * 1e9))
    }

    // MARK: stopping

    /// Gossips `left` (by datagram and over every link, so it is not lost), keeps gossiping for a
    /// moment, closes the links (bounded wait for them to drain), and marks the node stopped.
    func leave() async {
        guard !stopping else { return }
        stopping = true
        leftForGood.withLock { $0 = true }
        // Before anyone is told (on the I/O queue, after the commits handed over before it).
        if let state { _ = try? await io.run { state.markLeaving() } }
        log.info("leaving the session")
        let closeAt = shell.sayLeft()
        // Membership keeps running on the node's timer meanwhile, repeating `left` in its gossip.
        try? await Task.sleep(until: instant(at: closeAt), clock: .continuous)
        await closeLinks()
        markStopped()
    }

    /// Closes every link: what is queued still goes out, for at most `linkDrainWait`; a link whose
    /// peer has not read it all by then (stopped, stalled) is aborted, so no link outlives the node.
    func closeLinks() async {
        for link in links.values { link.close() }
        let deadline = ContinuousClock.now + Self.linkDrainWait
        while !links.isEmpty && ContinuousClock.now < deadline && mayWait {
            await wait(for: .linkClosed, until: deadline)
        }
        for link in links.values { link.abort() }
    }

    static let linkDrainWait: Duration = .seconds(3)

    /// Marks the node stopped: every wait on it ends (`wait(for:until:)`).
    func markStopped() {
        stopped = true
        timerSleeper?.cancel()
        timerSleeper = nil
        endAllWaits()
        for waiter in dialWaiters.values.joined() { waiter.resume(throwing: NodeError("the node has stopped")) }
        dialWaiters.removeAll()
    }

    func waitUntilStopped() async {
        while !stopped && !Task.isCancelled { await wait(for: .stopped) }
    }
}
