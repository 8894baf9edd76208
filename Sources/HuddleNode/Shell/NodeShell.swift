import HuddleControl
import HuddleCore
import HuddleCrypto

/// The node's ports for the shared shell (`SessionShell`): each executes on the node's actor
/// what the shell asks, with NIO links, the UDP socket, the chunk store and the event log.
///
/// Guarantees: it is only made and used on the node's actor (`Node.shell`), so every port runs
/// there (`assumeIsolated` checks it, and traps otherwise); it holds nothing but the node.
struct NodeShell: SessionShell {
    let node: Node

    var shellNow: Double { node.assumeIsolated { $0.now } }

    func withCore<R: Sendable>(_ body: (inout SessionCore) -> R) -> R {
        withoutActuallyEscaping(body) { body in
            // Not sent anywhere: `assumeIsolated` runs it at once, on the actor this is called on.
            nonisolated(unsafe) let body = body
            return node.assumeIsolated { body(&$0.core) }
        }
    }

    func withShellState<R: Sendable>(_ body: (inout ShellState) -> R) -> R {
        withoutActuallyEscaping(body) { body in
            // As in `withCore`.
            nonisolated(unsafe) let body = body
            return node.assumeIsolated { body(&$0.shellState) }
        }
    }

    func execute(_ effects: [SessionEffect]) { node.assumeIsolated { $0.execute(effects) } }

    func isLinked(_ peer: MemberID) -> Bool { node.assumeIsolated { $0.links[peer] != nil } }

    func sendOnLink(_ message: LinkMessage, to peer: MemberID) {
        node.assumeIsolated { $0.links[peer]?.send(message.encoded()) }
    }

    func linkQueuedBytes(_ peer: MemberID) -> Int {
        node.assumeIsolated { $0.links[peer]?.outbox.queuedBytes ?? 0 }
    }

    func sendOnEveryLink(_ message: LinkMessage) {
        node.assumeIsolated { node in
            let encoded = message.encoded()
            for link in node.links.values { link.send(encoded) }
        }
    }

    func forwardCircuit(_ message: LinkMessage, to peer: MemberID) { node.assumeIsolated { $0.relayForward(message, to: peer) } }

    func startDial(_ addr: String) { node.assumeIsolated { $0.dialInBackground(addr) } }

    func linkedPeers() -> [MemberID] { node.assumeIsolated { Array($0.links.keys) } }

    func linkWaited(_ peer: MemberID) -> Double? {
        node.assumeIsolated { node in
            node.links[peer]?.outbox.waitingSince.map { (ContinuousClock.now - $0) / .seconds(1) }
        }
    }

    func closeLink(_ peer: MemberID) { node.assumeIsolated { $0.links[peer]?.close() } }

    func abortLink(_ peer: MemberID) { node.assumeIsolated { $0.links[peer]?.abort() } }

    func sendDatagram(_ payload: DatagramPayload, to addr: String, sealing: DatagramSealing) {
        node.assumeIsolated { $0.sendDatagram(payload, to: addr, sealing: sealing) }
    }

    func memberChanged(_ change: MemberChange, _ info: MemberInfo, by: MemberID?) {
        node.assumeIsolated { $0.emitMember(change, info, by: by) }
    }

    func deliver(_ message: WireMessage, reliable: Bool, own: Bool) {
        node.assumeIsolated { $0.deliver(message, reliable: reliable) }
    }

    func gap(member: MemberID, fromSeq: UInt64, toSeq: UInt64) {
        node.assumeIsolated { node in
            node.events.append("gap", topic: .messages, ["member": .string(member.description), "from_seq": .int(Int64(clamping: fromSeq)),
                                                         "to_seq": .int(Int64(clamping: toSeq))])
            node.log.warning("messages \(fromSeq)...\(toSeq) of member \(member) are lost here: no member stores them any more")
        }
    }

    func activityChanged() {
        node.assumeIsolated { node in node.events.append("activity", topic: .activity, node.activityFields()) }
    }

    func participantsChanged(_ changes: [ParticipantChange]) { node.assumeIsolated { $0.emitParticipants(changes) } }

    func attachmentChanged(_ change: AttachmentChange, id: String) {
        node.assumeIsolated { node in
            node.emitAttachment(change.rawValue, id)
            // Its chunk file is read and hashed off the actor (`BulkWork`).
            if change == .added, node.resumed { node.spawner.spawn { await node.recoverStoredCopy(id) } }
        }
    }

    func attachmentWaitersWake(id: String, storeFull: Bool) {
        node.assumeIsolated { node in
            if storeFull {
                node.log.warning("stopped fetching attachment \(id): its next chunk would pass the store limit of \(node.journal.storeLimitBytes) bytes (--store-limit); it goes on once room is made")
            }
            node.wake(.attachment(id))
        }
    }

    func serveChunk(id: String, index: Int, to peer: MemberID) {
        node.assumeIsolated { node in
            if let link = node.links[peer] { node.serveChunk(id: id, index: index, to: link) }
        }
    }

    func recheckChunk(id: String, index: Int, reportedBy peer: MemberID) {
        node.assumeIsolated { $0.recheckChunk(id: id, index: index, reportedBy: peer) }
    }

    func deleteStored(id: String) {
        let store = node.store
        node.spawner.spawn { _ = try? await ChunkIO.run { store.remove(id) } }
    }

    /// False once the spawner has finished (the node stopped): it runs nothing then.
    func scheduleFlush() -> Bool {
        node.spawner.spawn { [node] in
            if let delay = FlushDelay.value { try? await Task.sleep(for: delay) }
            await node.flushScheduledBatch()
        }
    }

    func congestionCleared() { node.assumeIsolated { $0.wake(.congestion) } }

    // Write-ahead (`Node.execute`): the history that moved is committed already.
    func epochMoved(_ key: SessionKey) { node.assumeIsolated { $0.moveToEpoch(key) } }

    func epochRemoved(by maker: [UInt8], member: MemberID?) {
        node.assumeIsolated { node in
            node.log.warning("this node was removed from the session by node \(hexString(maker).prefix(16))\(member.map { " (member \($0))" } ?? ""): it holds no key of the session any more")
            node.wake(.epoch)
        }
    }

    func wakeAt(_ time: Double) { node.assumeIsolated { $0.armTimer(at: time) } }

    func circuitUp(peer: MemberID, via: MemberID, initiator: Bool, serial: UInt64) {
        node.assumeIsolated { $0.startCircuit(peer: peer, via: via, initiator: initiator, serial: serial) }
    }

    func circuitBytes(peer: MemberID, via: MemberID, _ bytes: [UInt8]) {
        node.assumeIsolated { $0.circuitBytes(peer: peer, via: via, bytes) }
    }

    func circuitDown(peer: MemberID, via: MemberID) { node.assumeIsolated { $0.circuitDown(peer: peer, via: via) } }

    func punchDial(peer: MemberID, addrs: [String], initiator: Bool) {
        node.assumeIsolated { $0.punchDial(peer: peer, addrs: addrs, initiator: initiator) }
    }

    func noted(_ note: ShellNote) {
        node.assumeIsolated { node in
            switch note {
            case let .refused(reason): node.logFirstRefusal(reason)
            case let .forged(origin, count):
                _ = node.counters.forged.wrappingAdd(count, ordering: .relaxed)
                node.log.warning("dropped \(count) message(s) or record(s) that claim origin \(origin) but are not signed by it")
            case let .unreadable(origin, what): node.log.warning("dropped an unreadable \(what) from \(origin)")
            case let .retransmitted(count): _ = node.counters.retransmits.wrappingAdd(count, ordering: .relaxed)
            case .repairRequested: break
            case .unreliableDropped: _ = node.counters.unreliableDropped.wrappingAdd(1, ordering: .relaxed)
            case let .linkAborted(peer, reason, queued):
                if node.counters.refuse(reason) { node.logFirstRefusal(reason) }
                let why = reason == .linkOverflow ? "more than \(node.shellState.linkBudget.hardLimitBytes)"
                                                  : "waiting \(node.shellState.linkBudget.stallSeconds) s without being read"
                node.log.warning("closing the link to \(peer): \(queued) bytes queued, \(why)")
            }
        }
    }
}
