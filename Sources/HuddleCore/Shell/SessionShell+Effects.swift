/// The one interpreter of `SessionEffect`: the node and the simulator both run it (through
/// `SessionShell.execute`, which may hold effects for a commit first), so every effect means the
/// same thing in both and no rule about executing one exists twice.
extension SessionShell {
    /// Bytes queued on a link past which an unreliable message for it is dropped, not queued
    /// (`LinkMessage.unreliable`: best effort as a datagram is, never in the way of what is reliable).
    public static var unreliableLinkBacklog: Int { 256 * 1024 }

    /// Carries out `effects` now, in order.
    public func perform(_ effects: [SessionEffect]) {
        for effect in effects {
            switch effect {
            case let .sendDatagram(payload, to, sealing): sendDatagram(payload, to: to, sealing: sealing)
            case let .sendLink(peer, message):
                switch message {
                case .circuitData: forwardCircuit(message, to: peer)
                // Best effort, as a datagram: dropped rather than queued behind a backed-up link.
                case .unreliable where linkQueuedBytes(peer) > Self.unreliableLinkBacklog: noted(.unreliableDropped(peer: peer))
                default: sendOnLink(message, to: peer)
                }
            case let .sendToLinks(message): sendOnEveryLink(message)
            case let .dial(addr, pushPull): dial(addr, pushPull: pushPull)
            case let .closeLink(member): closeLink(member)
            case let .member(change, info): memberChanged(change, info, by: nil)
            case let .memberRemoved(info, by): memberChanged(.removed, info, by: by)
            case let .deliver(signed): deliver(signed.message, reliable: true, own: false)
            case let .deliverOwn(message): deliver(message, reliable: true, own: true)
            case let .deliverUnreliable(message): deliver(message, reliable: false, own: false)
            case let .gap(member, fromSeq, toSeq): gap(member: member, fromSeq: fromSeq, toSeq: toSeq)
            case let .repairRequest(peer, origin, from, to):
                noted(.repairRequested(peer: peer, origin: origin, from: from, to: to))
                sendOnLink(.request(origin: origin, from: from, to: to), to: peer)
            case let .journal(effect): perform(effect)
            case .flushSoon:
                let first = withShellState { state -> Bool in
                    defer { state.flushScheduled = true }
                    return !state.flushScheduled
                }
                if first, !scheduleFlush() { withShellState { $0.flushScheduled = false } }
            case .congestionCleared: congestionCleared()
            case .activityChanged: activityChanged()
            case let .participants(changes): participantsChanged(changes)
            case let .serveChunk(peer, id, index):
                // A read for a peer whose link went is not made: the core's serve slot ends now.
                if isLinked(peer) { serveChunk(id: id, index: index, to: peer) } else { withCore { $0.chunkServeDropped(to: peer) } }
            case let .recheckChunk(id, index, peer): recheckChunk(id: id, index: index, reportedBy: peer)
            case let .epochMoved(key): epochMoved(key)
            case let .epochRemoved(by, member): epochRemoved(by: by, member: member)
            case let .circuitUp(peer, via, initiator): openCircuitEnd(peer: peer, via: via, initiator: initiator)
            case let .circuitBytes(peer, via, bytes): circuitBytes(peer: peer, via: via, bytes)
            case let .circuitDown(peer, via): closeCircuitEnd(peer: peer, via: via)
            case let .punchDial(peer, addrs, initiator): punchDial(peer: peer, addrs: addrs, initiator: initiator)
            case let .refused(reason): noted(.refused(reason))
            case let .forged(origin, count): noted(.forged(origin: origin, count: count))
            case let .unreadable(origin, what): noted(.unreadable(origin, what: what))
            case let .retransmitted(count): noted(.retransmitted(count))
            }
        }
    }

    /// Carries out what the journal decided.
    private func perform(_ effect: Journal.Effect) {
        switch effect {
        case let .sendHave(peer, id, have, offer): sendOnLink(.have(id: id, have: have, offer: offer), to: peer)
        case let .requestChunk(peer, id, index): sendOnLink(.chunkRequest(id: id, index: UInt32(clamping: index)), to: peer)
        case let .emit(change, id): attachmentChanged(change, id: id)
        case let .deleteStored(id): deleteStored(id: id)
        case let .changed(id): attachmentWaitersWake(id: id, storeFull: false)
        case let .storeFull(id): attachmentWaitersWake(id: id, storeFull: true)
        case let .refused(reason): noted(.refused(reason))
        }
    }

    /// The scheduled flush (`scheduleFlush`): this member's waiting messages go out as one batch.
    public func flushNow() {
        withShellState { $0.flushScheduled = false }
        execute(withCore { $0.flushBatch() })
    }

    /// The member's timer fired: the core's tick; the timer is armed again (`wakeAt`) for when the
    /// member next has work, at least `SessionCore.minimumTickGap` from now (a deadline that does
    /// not move cannot spin a shell), and that time is returned.
    @discardableResult
    public func tick() -> Double {
        let now = shellNow
        withShellState { state in
            state.lastTick = now
            state.armedWake = .infinity
        }
        execute(withCore { $0.tick(now: now) })
        closeStalledLinks(now: now)
        rearm()
        return withShellState { $0.armedWake }
    }

    /// After an input: if the member now has work before the time its timer is armed for (the
    /// core's deadline moved earlier), the timer is armed for that time (`wakeAt`). The shell calls
    /// it after every input's effects, so no shell polls the core's deadline.
    public func rearm() {
        let next = nextWake()
        let earlier = withShellState { state -> Bool in
            guard next < state.armedWake else { return false }
            state.armedWake = next
            return true
        }
        if earlier { wakeAt(next) }
    }

    /// When the member next has work: the core's deadline, but not sooner than
    /// `SessionCore.minimumTickGap` after its last tick.
    public func nextWake() -> Double {
        let last = withShellState { $0.lastTick }
        return max(shellNow, last + SessionCore.minimumTickGap, withCore { $0.nextDeadline })
    }
}
