/// This member's ends of circuits, as both shells keep them: each end the core opens is
/// recorded under a serial, and when an end closes for any cause but the core's own
/// `circuitDown` (the link over it ended, the link to its relay went, the handshake over it
/// failed) the core hears `circuitEnded` once. An end the core closed, or that a newer end with
/// the same peer replaced, is not told back.
extension SessionShell {
    /// The core opened an end with `peer` through `via` (`SessionEffect.circuitUp`): recorded under
    /// a new serial (an older end with `peer` is forgotten; the port closes it), then the port runs
    /// a link over it.
    func openCircuitEnd(peer: MemberID, via: MemberID, initiator: Bool) {
        let serial = withShellState { state -> UInt64 in
            state.circuitSerial &+= 1
            state.circuitEnds[peer] = CircuitEndRecord(via: via, serial: state.circuitSerial)
            return state.circuitSerial
        }
        circuitUp(peer: peer, via: via, initiator: initiator, serial: serial)
    }

    /// The core closed the circuit with `peer` through `via` (`SessionEffect.circuitDown`): the end
    /// is forgotten first, so its closing is not told back to the core, then the port closes it.
    func closeCircuitEnd(peer: MemberID, via: MemberID) {
        let held = withShellState { state -> Bool in
            guard state.circuitEnds[peer]?.via == via else { return false }
            state.circuitEnds[peer] = nil
            return true
        }
        if held { circuitDown(peer: peer, via: via) }
    }

    /// The end `serial` with `peer` (the serial the port's `circuitUp` was given) closed: the core
    /// is told (`SessionCore.circuitEnded`) if it is still this member's end with `peer`.
    public func circuitEndClosed(peer: MemberID, serial: UInt64) {
        let via = withShellState { state -> MemberID? in
            guard let end = state.circuitEnds[peer], end.serial == serial else { return nil }
            state.circuitEnds[peer] = nil
            return end.via
        }
        guard let via else { return }
        let now = shellNow
        execute(withCore { $0.circuitEnded(peer, via: via, now: now) })
    }
}

/// One of this member's circuit ends, as the shared shell records it (`ShellState.circuitEnds`).
struct CircuitEndRecord: Sendable {
    let via: MemberID
    let serial: UInt64
}
