import HuddleCore
import NIOCore

/// The shell of relaying (issue 36, item 2): what the core decided about circuits
/// (`SessionCore+Relay`), carried out. This member's ends of circuits are `CircuitEnd`s, and the
/// link over each one is run by `LinkSession.run` like any link; bytes only move here.
extension Node {
    /// A circuit with `peer` through `via` is open: runs a link over it (`initiator` starts the
    /// handshake). `serial`: the shared shell's for this end (`circuitEndClosed`).
    func startCircuit(peer: MemberID, via: MemberID, initiator: Bool, serial: UInt64) {
        circuitEnds.removeValue(forKey: peer)?.close()
        let end = CircuitEnd(peer: peer, via: via, total: circuitQueue)
        circuitEnds[peer] = end
        let key = initiator ? handshakeKeys().first : nil
        spawner.spawn { [self] in
            do {
                let (linkChannel, pump) = try await end.open()
                let scheduled = spawner.spawn { [self] in
                    await LinkSession.run(linkChannel, role: initiator ? .initiator : .responder, key: key, node: self, registered: nil, via: via)
                }
                // The node stopped meanwhile: nothing runs the link, so nothing is pumped either.
                guard scheduled else {
                    linkChannel.channel.close(promise: nil)
                    pump.channel.close(promise: nil)
                    throw NodeError("the node is stopping")
                }
                try await pump.executeThenClose { inbound, _ in
                    reading: for try await buffer in inbound {
                        // While the link to the relay is backlogged, this circuit waits (its link's
                        // writes back up in turn); it never closes another's — nor its own — for it.
                        // A link that stays backlogged is closed by the stall rule (`LinkBudget`).
                        while true {
                            switch await circuitOutgoing(end, buffer) {
                            case .sent: continue reading
                            case .gone: break reading
                            case .backlogged: try await Task.sleep(for: .milliseconds(20))
                            }
                        }
                    }
                }
            } catch {
                log.info("circuit to \(peer) through \(via) ended: \(error)")
            }
            end.close()
            await circuitFinished(end, serial: serial)
        }
    }

    /// Bytes waiting on the link to a relay past which this member's circuit ends through it stop
    /// reading their links' bytes (`circuitOutgoing` says `backlogged`). Well under
    /// `LinkBudget.backlogBytes`: everything else this member says to the relay (SWIM over the link,
    /// digests) waits behind them, and a relay paces a circuit at its budget (`RelayCircuits.readPause`).
    static let circuitBacklogBytes = 512 << 10

    /// After a `circuitData` from `link`: while this member, as a relay, is not to read more from
    /// its member (its budget is in debt, or a queue its circuit fills is full:
    /// `RelayCircuits.readPause`), or, as a circuit end, holds `CircuitEnd.pauseBytes` or more from
    /// that relay unread by a circuit's link, waits (the link's reader waits with it, so TCP slows
    /// the sender). A circuit over its budget slows its sender instead of being closed (issue 36).
    func paceCircuits(from link: LinkHandle) async {
        let member = link.peer.id
        var paused = false
        while links[member] === link, mayWait, !stopping {
            var wait = core.relay.readPause(for: member, queued: { links[$0]?.outbox.queuedBytes ?? 0 }, now: now)
            if wait == nil, circuitEnds.values.contains(where: { $0.via == member && $0.queuedBytes >= CircuitEnd.pauseBytes }) {
                wait = RelayCircuits.queuePause
            }
            guard let wait else { break }
            if !paused { events.endDeferring(); paused = true }
            let arrived = batchArrived
            try? await Task.sleep(for: .milliseconds(Int64(min(max(wait, 0.002), 0.1) * 1000)))
            batchArrived = arrived
        }
        if paused { events.beginDeferring() }
    }

    /// What became of bytes handed to `circuitOutgoing`.
    enum CircuitSend { case sent, gone, backlogged }

    /// Bytes of the link over `end`'s circuit, to its relay, in `circuitData` messages of at most
    /// `LinkMessage.circuitDataLimit` bytes (a read may bring more: NIO rounds the allocator's
    /// maximum up to a power of two, and one message past the limit would make the relay close
    /// its whole link to this member); `gone` when the circuit or the link to the relay is gone,
    /// `backlogged` (nothing sent: try again later) while that link has `circuitBacklogBytes`
    /// waiting — shared by every circuit through that relay, so no one circuit is closed for it.
    private func circuitOutgoing(_ end: CircuitEnd, _ buffer: ByteBuffer) -> CircuitSend {
        guard circuitEnds[end.peer] === end, let relay = links[end.via] else { return .gone }
        guard relay.outbox.queuedBytes < Self.circuitBacklogBytes else { return .backlogged }
        // Each piece copied once, straight from the read (not the whole read first, then each piece).
        var rest = buffer.readableBytesView[...]
        while !rest.isEmpty {
            let piece = rest.prefix(LinkMessage.circuitDataLimit)
            rest = rest.dropFirst(piece.count)
            relay.send(LinkMessage.circuitData(peer: end.peer, bytes: Array(piece)).encoded())
        }
        return .sent
    }

    /// `end` closed (its link ended, or the relay closed it): it leaves the table unless a newer
    /// end replaced it, and the shared shell tells the core if it is still due (`circuitEndClosed`).
    private func circuitFinished(_ end: CircuitEnd, serial: UInt64) {
        if circuitEnds[end.peer] === end { circuitEnds[end.peer] = nil }
        shell.circuitEndClosed(peer: end.peer, serial: serial)
    }

    /// Bytes from the relay for the link over the circuit with `peer`.
    func circuitBytes(peer: MemberID, via: MemberID, _ bytes: [UInt8]) {
        guard let end = circuitEnds[peer], end.via == via else { return }
        if !end.deliver(bytes) {
            log.warning("closing the circuit to \(peer) through \(via): \(CircuitEnd.queueBytes) bytes wait for its link")
            end.close()
        }
    }

    /// The core closed the circuit with `peer` (the relay or the peer did): the link over it ends.
    func circuitDown(peer: MemberID, via: MemberID) {
        guard let end = circuitEnds[peer], end.via == via else { return }
        circuitEnds[peer] = nil
        end.close()
    }

    /// Bytes this member forwards as a relay (`forward`), perhaps changed, dropped or held for
    /// tests (`RelayCorruption`).
    func relayForward(_ message: LinkMessage, to peer: MemberID) {
        guard let link = links[peer] else { return }
        if case let .circuitData(from, bytes) = message {
            relayCorruption.count(bytes.count)
            relayCorruption.scan(bytes, from: from)
            guard let forwarded = relayCorruption.apply(bytes) else { return }
            link.send(LinkMessage.circuitData(peer: from, bytes: forwarded).encoded())
            return
        }
        link.send(message.encoded())
    }
}
