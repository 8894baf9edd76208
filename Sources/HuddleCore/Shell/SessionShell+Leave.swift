/// A graceful leave as both shells run it, in `LeavePlan`'s order: the plan's effects, each planned
/// chunk pushed to its peer while that peer's link is up, a bounded wait until the receivers hold
/// them, then `left` gossiped and the links closed `SessionCore.leaveLinger` later. The shell only
/// reads and sends each chunk the sequence hands it and waits when told; every rule is here.
extension SessionShell {
    /// Begins a graceful leave (`SessionCore.beginLeave`): runs the plan's effects and keeps its
    /// hand-off. The shell then takes `nextHandOff()` until it is nil, pushing each chunk over the
    /// peer's link, and waits while `handOffProgress()` says so.
    /// A leave already under way is joined, not begun again: its plan and its wait stand.
    public func beginLeave(_ cause: LeaveCause) {
        guard withShellState({ $0.leave == nil }) else { return }
        let plan = withCore { $0.beginLeave(cause) }
        execute(plan.effects)
        // Within a day: a `timeout_ms` from a control client cannot make the deadline overflow.
        let wait = min(plan.handOffWait, 86_400)
        withShellState { $0.leave = LeaveState(planned: plan.handOff[...], pushed: [], wait: wait) }
    }

    /// The next planned chunk to push (`peer`'s link is up); nil when none is left, and the wait
    /// for the receivers starts then (reading the chunks does not count against it). A chunk
    /// handed out counts as pushed: a shell that then cannot read it says so with `handOffFailed`.
    public func nextHandOff() -> (peer: MemberID, id: String, index: Int)? {
        while let next = withShellState({ state -> (peer: MemberID, id: String, index: Int)? in
            guard state.leave != nil else { return nil }
            return state.leave!.planned.popFirst()
        }) {
            guard isLinked(next.peer) else { continue }
            withShellState { $0.leave?.pushed.append((next.id, next.index)) }
            return next
        }
        let now = shellNow
        withShellState { state in
            if let wait = state.leave?.wait, state.leave?.until == nil { state.leave?.until = now + wait }
        }
        return nil
    }

    /// A chunk `nextHandOff` gave could not be pushed (the store could not read it): the wait no
    /// longer counts on it.
    public func handOffFailed(id: String, index: Int) {
        withShellState { state in
            if let k = state.leave?.pushed.firstIndex(where: { $0.id == id && $0.index == index }) { state.leave?.pushed.remove(at: k) }
        }
    }

    /// Where the hand-off stands: `waiting` until the receivers of every pushed chunk hold it (look
    /// again when a `have` arrives, or at `until` on this member's clock), else `done` with how
    /// many chunks another live member now holds.
    public func handOffProgress() -> HandOffProgress {
        let now = shellNow
        guard let leave = withShellState({ $0.leave }) else { return .done(handedOff: 0) }
        let held = withCore { $0.handedOff(leave.pushed) }
        // Asked before every chunk was handed out: the wait is counted from now.
        let until = leave.until ?? now + leave.wait
        if held == leave.pushed.count || now >= until { return .done(handedOff: held) }
        return .waiting(until: until)
    }

    /// How many pushed chunks another live member holds now (what a leave whose wait was cut
    /// short, the member stopping, reports).
    public func handedOffSoFar() -> Int {
        guard let leave = withShellState({ $0.leave }) else { return 0 }
        return withCore { $0.handedOff(leave.pushed) }
    }

    /// This member leaves (`SessionCore.leave(now:)`: `left` over datagrams and every link).
    /// Returns when, on this member's clock, the shell closes its links: membership keeps running
    /// until then, repeating `left` in its gossip.
    public func sayLeft() -> Double {
        let now = shellNow
        withShellState { $0.leave = nil }
        execute(withCore { $0.leave(now: now) })
        return now + SessionCore.leaveLinger
    }
}

/// How a graceful leave's hand-off stands (`SessionShell.handOffProgress`).
public enum HandOffProgress: Sendable, Equatable {
    /// Some pushed chunk is not yet held by another live member: wait until a `have` arrives, or
    /// until `until` (seconds, this member's clock).
    case waiting(until: Double)
    /// The wait is over: every pushed chunk is held elsewhere, or the time ran out.
    case done(handedOff: Int)
}

/// A graceful leave in progress, as the shared shell keeps it (`ShellState.leave`).
struct LeaveState: Sendable {
    /// The plan's chunks not yet handed to the shell.
    var planned: ArraySlice<(peer: MemberID, id: String, index: Int)>
    /// The chunks handed to the shell to push.
    var pushed: [(id: String, index: Int)]
    /// How long the wait for the receivers lasts, once every chunk has been handed out.
    var wait: Double
    /// When that wait ends, on this member's clock (nil while chunks are still handed out).
    var until: Double?
}
