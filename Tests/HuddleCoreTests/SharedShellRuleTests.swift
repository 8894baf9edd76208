import HuddleCrypto
import Testing
@testable import HuddleCore

/// Rules of the shared shell (`SessionShell+Effects`) checked against ports that only record what
/// they were asked to do.
final class RecordingShell: SessionShell {
    var core: SessionCore
    var state = ShellState()
    var now = 1.0
    var linked: Set<MemberID>? = nil
    var queued: [MemberID: Int] = [:]
    var sent: [(LinkMessage, MemberID)] = []
    var notes: [ShellNote] = []
    var circuitsUp: [(peer: MemberID, via: MemberID, serial: UInt64)] = []
    var circuitsDown: [(peer: MemberID, via: MemberID)] = []
    var wakes: [Double] = []
    var waited: [MemberID: Double] = [:]
    var aborted: [MemberID] = []

    init(core: SessionCore) { self.core = core }

    var shellNow: Double { now }
    func withCore<R: Sendable>(_ body: (inout SessionCore) -> R) -> R { body(&core) }
    func withShellState<R: Sendable>(_ body: (inout ShellState) -> R) -> R { body(&state) }
    func execute(_ effects: [SessionEffect]) { perform(effects) }
    func isLinked(_ peer: MemberID) -> Bool { linked?.contains(peer) ?? true }
    func sendOnLink(_ message: LinkMessage, to peer: MemberID) { sent.append((message, peer)) }
    func sendOnEveryLink(_ message: LinkMessage) {}
    func forwardCircuit(_ message: LinkMessage, to peer: MemberID) {}
    func startDial(_ addr: String) {}
    func linkQueuedBytes(_ peer: MemberID) -> Int { queued[peer] ?? 0 }
    func linkedPeers() -> [MemberID] { linked.map { $0.sorted() } ?? [] }
    func linkWaited(_ peer: MemberID) -> Double? { waited[peer] }
    func closeLink(_ peer: MemberID) {}
    func abortLink(_ peer: MemberID) { aborted.append(peer) }
    func sendDatagram(_ payload: DatagramPayload, to addr: String, sealing: DatagramSealing) {}
    func memberChanged(_ change: MemberChange, _ info: MemberInfo, by: MemberID?) {}
    func deliver(_ message: WireMessage, reliable: Bool, own: Bool) {}
    func gap(member: MemberID, fromSeq: UInt64, toSeq: UInt64) {}
    func activityChanged() {}
    func participantsChanged(_ changes: [ParticipantChange]) {}
    func attachmentChanged(_ change: AttachmentChange, id: String) {}
    func attachmentWaitersWake(id: String, storeFull: Bool) {}
    func serveChunk(id: String, index: Int, to peer: MemberID) {}
    func recheckChunk(id: String, index: Int, reportedBy peer: MemberID) {}
    func deleteStored(id: String) {}
    func scheduleFlush() -> Bool { true }
    func congestionCleared() {}
    func wakeAt(_ time: Double) { wakes.append(time) }
    func epochMoved(_ key: SessionKey) {}
    func epochRemoved(by maker: [UInt8], member: MemberID?) {}
    func circuitUp(peer: MemberID, via: MemberID, initiator: Bool, serial: UInt64) { circuitsUp.append((peer, via, serial)) }
    func circuitBytes(peer: MemberID, via: MemberID, _ bytes: [UInt8]) {}
    func circuitDown(peer: MemberID, via: MemberID) { circuitsDown.append((peer, via)) }
    func punchDial(peer: MemberID, addrs: [String], initiator: Bool) {}
    func noted(_ note: ShellNote) { notes.append(note) }
}

/// An unreliable message over a link is best effort as a datagram is: dropped (and noted) when the
/// link is backed up past `unreliableLinkBacklog`, never queued behind it; reliable ones queue.
@Test func anUnreliableMessageForABackedUpLinkIsDroppedAndNotedWhileReliableOnesQueue() {
    let identity = Identity(seed: [UInt8](repeating: 5, count: 32))
    let me = MemberInfo(id: MemberID(raw: 5), node: identity.publicKey, name: "me", addr: testAddr("me"), incarnation: 0).signed(by: identity)
    let shell = RecordingShell(core: SessionCore(local: me, identity: identity, joining: false, swimSeed: 1, journalSeed: 1))
    let (free, backed) = (MemberID(raw: 7), MemberID(raw: 9))
    shell.queued[backed] = RecordingShell.unreliableLinkBacklog + 1
    shell.queued[free] = RecordingShell.unreliableLinkBacklog
    let message = WireMessage(origin: me.id, counter: 1, seq: 0, to: nil, body: [1])
    shell.perform([.sendLink(backed, .unreliable(message)), .sendLink(free, .unreliable(message)), .sendLink(backed, .hello(since: 0, nonApplication: 0))])
    #expect(shell.sent.map(\.1) == [free, backed], "the unreliable one to the free link, the reliable one to both")
    #expect(shell.notes == [.unreliableDropped(peer: backed)])
}

/// The link budget as both shells run it (`SessionShell+LinkBudget`): a peer whose queue is at the
/// backlog has its requests for bulk answers refused; on a tick, a link past the hard limit, or
/// whose bytes waited the stall time, is aborted and noted, and no other.
@Test func theLinkBudgetRefusesBulkAtTheBacklogAndAbortsOverflowingOrStalledLinksOnATick() {
    let identity = Identity(seed: [UInt8](repeating: 5, count: 32))
    let me = MemberInfo(id: MemberID(raw: 5), node: identity.publicKey, name: "me", addr: testAddr("me"), incarnation: 0).signed(by: identity)
    let shell = RecordingShell(core: SessionCore(local: me, identity: identity, joining: false, swimSeed: 1, journalSeed: 1))
    shell.state.linkBudget.stallSeconds = 10
    let budget = shell.state.linkBudget
    let (fine, full, slow, stuck, over) = (MemberID(raw: 6), MemberID(raw: 7), MemberID(raw: 8), MemberID(raw: 9), MemberID(raw: 10))
    shell.linked = [fine, full, slow, stuck, over]

    // At the backlog, a request for a bulk answer is refused (counted by the core); below it, not.
    shell.queued[full] = budget.backlogBytes
    shell.queued[fine] = budget.backlogBytes - 1
    let ask = LinkMessage.timeRequest(wallMicros: 1)
    shell.receiveLink(ask, from: full, addr: testAddr("full"))
    #expect(shell.core.refusals[.outboxFull] == 1)
    shell.receiveLink(ask, from: fine, addr: testAddr("fine"))
    #expect(shell.core.refusals[.outboxFull] == 1, "below the backlog the request is taken")

    // On a tick: the link past the hard limit and the one that waited the stall time go.
    shell.queued[over] = budget.hardLimitBytes + 1
    shell.waited[slow] = 9.9
    shell.waited[stuck] = 10
    shell.queued[stuck] = 512
    _ = shell.tick()
    #expect(shell.aborted.sorted() == [stuck, over])
    #expect(shell.notes.contains(.linkAborted(peer: over, .linkOverflow, queuedBytes: budget.hardLimitBytes + 1)))
    #expect(shell.notes.contains(.linkAborted(peer: stuck, .stalledLink, queuedBytes: 512)))
    #expect(budget.verdict(queuedBytes: budget.hardLimitBytes, waited: nil) == .keep, "at the hard limit a link stays")

    // The links are held against the budget at most once per check interval: a queue past the
    // hard limit is found at the first tick that interval after the last check.
    shell.queued[fine] = budget.hardLimitBytes + 1
    shell.now += budget.checkInterval / 2
    _ = shell.tick()
    #expect(!shell.aborted.contains(fine), "not checked again within the interval")
    shell.now += budget.checkInterval / 2
    _ = shell.tick()
    #expect(shell.aborted.contains(fine), "checked once the interval has passed")
}

/// A graceful leave as both shells run it (`SessionShell+Leave`): only chunks whose peer is linked
/// are handed out, a chunk the shell could not read is not waited for, the wait ends when every
/// pushed chunk is held elsewhere or at its deadline, and then the member leaves, its links to
/// close `leaveLinger` later.
@Test func aLeaveHandsOutLinkedChunksWaitsUntilTheyAreHeldOrTheDeadlineThenSaysLeft() {
    let ids = (1...3).map { MemberID(raw: $0) }
    let keys = ids.map { Identity(seed: [UInt8](repeating: UInt8($0.raw), count: 32)) }
    let infos = zip(ids, keys).map { MemberInfo(id: $0, node: $1.publicKey, name: "\($0.raw)", addr: testAddr("m\($0.raw)")).signed(by: $1) }
    var core = SessionCore(local: infos[0], identity: keys[0], joining: false, swimSeed: 1, journalSeed: 1)
    _ = core.receivePushPull(SWIMPushPull(join: false, members: Array(infos[1...])), from: testAddr("m"), now: 0)
    for peer in ids[1...] { _ = core.linkUp(peer) }
    // An attachment of three chunks only this member holds.
    let hashes = (0..<3).map { BLAKE2b.hash([UInt8($0)], length: 32) }
    var manifest = Manifest(name: "f", size: 3 * 262_144, chunkSize: 262_144, chunkHashes: hashes, meta: [], uploader: ids[0],
                            uploaderNodeKey: keys[0].publicKey, signature: [])
    manifest.sign(with: keys[0], key: [UInt8](repeating: 7, count: 32))
    _ = core.addAttachment(manifest, key: [UInt8](repeating: 7, count: 32), now: 0)

    let shell = RecordingShell(core: core)
    shell.linked = [ids[1]]
    shell.beginLeave(.request(handOffWait: 5))
    var handed: [(peer: MemberID, id: String, index: Int)] = []
    while let next = shell.nextHandOff() { handed.append(next) }
    // The plan takes the linked members in turn (chunks 0 and 2 to the first, 1 to the second):
    // the second is not linked here.
    #expect(handed.map(\.peer) == [ids[1], ids[1]] && handed.map(\.index) == [0, 2])
    #expect(shell.handOffProgress() == .waiting(until: 6))

    // Chunk 0 cannot be read: it is not waited for; chunk 2 becomes held by the receiver.
    shell.handOffFailed(id: manifest.id, index: 0)
    var have = Bitfield(count: 3)
    have[2] = true
    _ = shell.core.receiveLink(.have(id: manifest.id, have: have, offer: have), from: ids[1], addr: infos[1].addr, now: 2)
    #expect(shell.handOffProgress() == .done(handedOff: 1))

    // Nothing held: the wait ends at its deadline, not before.
    let again = RecordingShell(core: core)
    again.beginLeave(.request(handOffWait: 5))
    while again.nextHandOff() != nil {}
    again.now = 5.9
    #expect(again.handOffProgress() == .waiting(until: 6))
    again.now = 6
    #expect(again.handOffProgress() == .done(handedOff: 0))

    // The wait starts once every chunk is handed out (reading them does not count against it),
    // and a second leave joins the one under way.
    let slow = RecordingShell(core: core)
    slow.beginLeave(.request(handOffWait: 5))
    #expect(slow.nextHandOff() != nil)
    slow.now = 4
    slow.beginLeave(.signal)
    while slow.nextHandOff() != nil {}
    slow.now = 8.9
    #expect(slow.handOffProgress() == .waiting(until: 9), "5 s from the last chunk handed out, not from the start")
    #expect(slow.handedOffSoFar() == 0)
    #expect(again.core.swim.local.state != .left)
    #expect(again.sayLeft() == 6 + SessionCore.leaveLinger)
    #expect(again.core.swim.local.state == .left)
    #expect(again.handOffProgress() == .done(handedOff: 0), "the leave's state is gone")
}

/// The timer (`tick`, `rearm`): a tick arms it for when the core next has work, no sooner than
/// `minimumTickGap`; after an input it is armed again only when that time is earlier than the
/// armed one, so a shell is told when to wake and never polls.
@Test func theTimerIsArmedByEachTickAndReArmedOnlyForAnEarlierTime() {
    let identity = Identity(seed: [UInt8](repeating: 5, count: 32))
    let me = MemberInfo(id: MemberID(raw: 5), node: identity.publicKey, name: "me", addr: testAddr("me"), incarnation: 0).signed(by: identity)
    let shell = RecordingShell(core: SessionCore(local: me, identity: identity, joining: false, swimSeed: 1, journalSeed: 1))
    shell.now = 10
    let next = shell.tick()
    #expect(next >= 10 + SessionCore.minimumTickGap && next.isFinite)
    #expect(shell.wakes == [next] && shell.state.armedWake == next)
    shell.rearm()
    #expect(shell.wakes == [next], "the same time again is not a new arming")

    // Armed for later than the core needs (as after an input that brought its deadline forward).
    shell.state.armedWake = next + 5
    shell.rearm()
    #expect(shell.wakes == [next, next] && shell.state.armedWake == next)
    // Armed for sooner: left as it is.
    shell.state.armedWake = next - 0.001
    shell.rearm()
    #expect(shell.wakes.count == 2 && shell.state.armedWake == next - 0.001)
}
