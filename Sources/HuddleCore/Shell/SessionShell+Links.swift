/// Links as both shells run them: one dial per address at a time, a push-pull that waits for its
/// link, the link-up in the order `LinkDecision` names, and a link's end told to the core with
/// whether it had settled.
extension SessionShell {
    /// Dials `addr` unless a dial to it is in flight; `pushPull` (join or not): exchange full
    /// membership state over the link once it is up. A second request for an address being dialed
    /// only adds its push-pull.
    public func dial(_ addr: String, pushPull join: Bool?) {
        let first = withShellState { state -> Bool in
            if let pending = state.dials[addr] {
                // `join` wins over a plain push-pull; a plain one over none.
                if let join { state.dials[addr] = .some((pending ?? false) || join) }
                return false
            }
            state.dials[addr] = .some(join)
            return true
        }
        if first { startDial(addr) }
    }

    /// A dial `startDial` made ended: linked to `peer` (nil: it failed, or the link was refused).
    /// The push-pull waiting for it goes out now.
    public func dialFinished(_ addr: String, peer: MemberID?) {
        let join = withShellState { $0.dials.removeValue(forKey: addr) ?? nil }
        if let join, let peer, isLinked(peer) { sendPushPull(to: peer, join: join) }
    }

    /// Sends a push-pull request (in parts) over the link to `peer`.
    public func sendPushPull(to peer: MemberID, join: Bool) {
        for part in withCore({ $0.pushPullRequest(to: peer, join: join) }) { sendOnLink(part, to: peer) }
    }

    /// A link's handshake finished: the core decides (`SessionCore.linkEstablished`). Admitted,
    /// the link-up runs in its order: the link it replaces closes, the waiting batch goes out on
    /// the links that were up (`before`), the link is installed (`install`, at this end), its
    /// hello goes first on it, then `after`. Refused or a duplicate: the caller closes the new link.
    public func linkEstablished(_ candidate: LinkCandidate, install: () -> Void) -> LinkDecision {
        let now = shellNow
        let decision = withCore { $0.linkEstablished(candidate, now: now) }
        guard case let .admitted(replaces, before, hello, after) = decision else { return decision }
        let peer = candidate.peer.id
        if replaces { closeLink(peer) }
        execute(before)
        install()
        withShellState { $0.linkUpAt[peer] = now }
        sendOnLink(hello, to: peer)
        execute(after)
        return decision
    }

    /// The link to `peer` installed by `linkEstablished` closed (either end, any cause). `settled`:
    /// false when the member is stopping (no link of a stopping member failed its peer).
    public func linkClosed(_ peer: MemberID, stopping: Bool = false) {
        let now = shellNow
        let upAt = withShellState { $0.linkUpAt.removeValue(forKey: peer) } ?? now
        let settled = !stopping && SessionCore.isSettled(upFor: now - upAt)
        execute(withCore { $0.linkDown(peer, settled: settled, now: now) })
    }
}
