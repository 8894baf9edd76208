import HuddleCrypto

/// The ports of a session shell: what one member's node (NIO, files, its event log) or the
/// simulator (its event queue, its report) does when the shared shell asks. A port executes and
/// decides nothing; every rule about *when* and *in what order* lives once, in the extensions of
/// this protocol (`SessionShell+Effects`, `SessionShell+Links`), which both shells run.
///
/// Guarantees the shared shell relies on: `withCore` and `withShellState` run their body at once
/// and call no port inside it but `linkQueuedBytes`, which reads no core (so a port may read the
/// core freely); a port never calls back into
/// the shared shell synchronously except where its documentation says so (`startDial` reports
/// its end through `dialFinished`).
public protocol SessionShell {
    /// This member's clock (seconds, monotonic), as every core input takes it.
    var shellNow: Double { get }
    /// Runs `body` on this member's core.
    func withCore<R: Sendable>(_ body: (inout SessionCore) -> R) -> R
    /// Runs `body` on the shared shell's own state for this member.
    func withShellState<R: Sendable>(_ body: (inout ShellState) -> R) -> R
    /// Hands effects to the shell's entry: the node may hold them until a commit (write-ahead)
    /// before they reach `perform`; the simulator performs them at once.
    func execute(_ effects: [SessionEffect])

    // Links.
    /// Whether a link to `peer` is up at this end.
    func isLinked(_ peer: MemberID) -> Bool
    /// Queues `message` on the link to `peer` (nothing when none is up).
    func sendOnLink(_ message: LinkMessage, to peer: MemberID)
    /// Queues `message` on every link that is up.
    func sendOnEveryLink(_ message: LinkMessage)
    /// Forwards a relayed link's bytes (`LinkMessage.circuitData`) towards `peer`, within the
    /// relay's budgets.
    func forwardCircuit(_ message: LinkMessage, to peer: MemberID)
    /// Opens a link to `addr` (connect, handshake, then `linkEstablished`); reports its end with
    /// `dialFinished(addr, peer:)`: later, or at once when it cannot dial at all.
    func startDial(_ addr: String)
    /// Bytes queued on the link to `peer`, not yet written (0 without one). Reads no core.
    func linkQueuedBytes(_ peer: MemberID) -> Int
    /// The members whose links are up at this end.
    func linkedPeers() -> [MemberID]
    /// Seconds the bytes queued on the link to `peer` have waited with no take by its writer, or
    /// with `LinkBudget.backlogBytes` or more still queued after every take; nil when nothing waits.
    func linkWaited(_ peer: MemberID) -> Double?
    /// Closes the link to `peer` once what is queued on it has gone out.
    func closeLink(_ peer: MemberID)
    /// Closes the link to `peer` now, dropping what is queued on it (`closeStalledLinks`).
    func abortLink(_ peer: MemberID)

    // Datagrams.
    func sendDatagram(_ payload: DatagramPayload, to addr: String, sealing: DatagramSealing)

    // What the application sees.
    func memberChanged(_ change: MemberChange, _ info: MemberInfo, by: MemberID?)
    /// A message for the application: a broadcast or directed one (`reliable`), this member's
    /// own (`own`), or an unreliable one.
    func deliver(_ message: WireMessage, reliable: Bool, own: Bool)
    func gap(member: MemberID, fromSeq: UInt64, toSeq: UInt64)
    func activityChanged()
    func participantsChanged(_ changes: [ParticipantChange])
    func attachmentChanged(_ change: AttachmentChange, id: String)
    /// Something about the attachment changed (`Journal.Effect.changed`), or fetching it stopped
    /// at the store limit (`storeFull`): whoever waits on it looks again.
    func attachmentWaitersWake(id: String, storeFull: Bool)

    // The store.
    /// Reads chunk `index` of `id` for `peer` (whose link is up), tells the core
    /// (`SessionCore.chunkRead`) and sends it if the core says so.
    func serveChunk(id: String, index: Int, to peer: MemberID)
    func recheckChunk(id: String, index: Int, reportedBy peer: MemberID)
    func deleteStored(id: String)

    // Timers.
    /// Runs `flushNow()` soon, once, after the current input's effects; false when it cannot
    /// (the shell is stopping), and the flush is not pending then.
    func scheduleFlush() -> Bool
    /// Senders waiting for the broadcast's congestion to clear may go on.
    func congestionCleared()
    /// The member's timer is to fire (`tick()`) at `time`, this member's clock, instead of the
    /// later time it was armed for (`ShellState.armedWake` holds it).
    func wakeAt(_ time: Double)

    // Epochs.
    func epochMoved(_ key: SessionKey)
    func epochRemoved(by maker: [UInt8], member: MemberID?)

    // Relayed links and punching.
    /// Runs a link over this member's new end of a circuit with `peer` through `via`, closing an
    /// older end with `peer`; when the end closes by any cause but `circuitDown`, the shell says
    /// so with `circuitEndClosed(peer:serial:)`.
    func circuitUp(peer: MemberID, via: MemberID, initiator: Bool, serial: UInt64)
    func circuitBytes(peer: MemberID, via: MemberID, _ bytes: [UInt8])
    /// Closes this member's end of the circuit with `peer` through `via` (the core closed it).
    func circuitDown(peer: MemberID, via: MemberID)
    func punchDial(peer: MemberID, addrs: [String], initiator: Bool)

    // What is only counted or logged.
    func noted(_ note: ShellNote)
}

/// What the shell counts or logs and nothing else follows from.
public enum ShellNote: Sendable, Equatable {
    case refused(Refusal)
    case forged(origin: MemberID, count: Int)
    case unreadable(MemberID, what: String)
    case retransmitted(Int)
    case repairRequested(peer: MemberID, origin: MemberID, from: UInt64, to: UInt64)
    /// An unreliable message for `peer`'s link was dropped: the link was backed up
    /// (`SessionShell.unreliableLinkBacklog`), and a best-effort message does not queue behind it.
    case unreliableDropped(peer: MemberID)
    /// The link to `peer` was aborted with `queuedBytes` queued: the budget refused it
    /// (`Refusal.linkOverflow` or `Refusal.stalledLink`, `LinkBudget`).
    case linkAborted(peer: MemberID, Refusal, queuedBytes: Int)
}

/// The shared shell's own state for one member: what it remembers between inputs so that a dial
/// is not made twice, a push-pull waits for its link, and a flush is scheduled once.
public struct ShellState: Sendable {
    /// A flush is scheduled and has not run yet.
    public internal(set) var flushScheduled = false
    /// Addresses being dialed, each with the push-pull to make over its link once up (nil: none).
    var dials: [String: Bool?] = [:]
    /// When each link up at this end came up (`SessionCore.isSettled(upFor:)` at its end).
    var linkUpAt: [MemberID: Double] = [:]
    /// When the member last ticked (`SessionCore.minimumTickGap`).
    var lastTick = -Double.infinity
    /// When the links were last held against the budget (`closeStalledLinks`).
    var budgetCheckedAt = -Double.infinity
    /// When the member's timer fires next (infinity: it is not armed), as `tick` and `rearm` set it.
    public internal(set) var armedWake = Double.infinity
    /// A graceful leave under way (`SessionShell+Leave`).
    var leave: LeaveState?
    /// This member's circuit ends, by peer, and the last serial given (`SessionShell+Circuits`).
    var circuitEnds: [MemberID: CircuitEndRecord] = [:]
    var circuitSerial: UInt64 = 0
    /// The budget of this member's link queues (`LinkBudget`; the node's `--link-stall-seconds`).
    public var linkBudget: LinkBudget

    public init(linkBudget: LinkBudget = LinkBudget()) { self.linkBudget = linkBudget }
}
