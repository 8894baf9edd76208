import HuddleCrypto
import Testing
@testable import HuddleCore

/// Rules of the shared shell (`SessionShell+Effects`) checked against ports that only record what
/// they were asked to do.
private final class RecordingShell: SessionShell {
    var core: SessionCore
    var state = ShellState()
    var queued: [MemberID: Int] = [:]
    var sent: [(LinkMessage, MemberID)] = []
    var notes: [ShellNote] = []

    init(core: SessionCore) { self.core = core }

    var shellNow: Double { 1 }
    func withCore<R: Sendable>(_ body: (inout SessionCore) -> R) -> R { body(&core) }
    func withShellState<R: Sendable>(_ body: (inout ShellState) -> R) -> R { body(&state) }
    func execute(_ effects: [SessionEffect]) { perform(effects) }
    func isLinked(_ peer: MemberID) -> Bool { true }
    func linkedMember(at addr: String) -> MemberID? { nil }
    func sendOnLink(_ message: LinkMessage, to peer: MemberID) { sent.append((message, peer)) }
    func sendOnEveryLink(_ message: LinkMessage) {}
    func forwardCircuit(_ message: LinkMessage, to peer: MemberID) {}
    func startDial(_ addr: String) {}
    func linkQueuedBytes(_ peer: MemberID) -> Int { queued[peer] ?? 0 }
    func closeLink(_ peer: MemberID) {}
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
    func epochMoved(_ key: SessionKey) {}
    func epochRemoved(by maker: [UInt8], member: MemberID?) {}
    func circuitUp(peer: MemberID, via: MemberID, initiator: Bool) {}
    func circuitBytes(peer: MemberID, via: MemberID, _ bytes: [UInt8]) {}
    func circuitDown(peer: MemberID, via: MemberID) {}
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
