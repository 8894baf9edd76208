/// The link budget's two rules (`LinkBudget`), run once for both shells: a link's messages go to
/// the core told whether this end's queue to their sender is backlogged, and on a tick (at most
/// once per `LinkBudget.checkInterval`) a link the budget no longer allows is aborted.
extension SessionShell {
    /// A message from `peer` over its link (`addr`: its record's address): the core takes it, told
    /// whether the queue to `peer` is backlogged (its requests for bulk answers are then refused)
    /// and what waits on the queues to others (what a relay may still forward to them).
    public func receiveLink(_ message: LinkMessage, from peer: MemberID, addr: String) {
        let now = shellNow
        let backlogged = withShellState { $0.linkBudget }.isBacklogged(queuedBytes: linkQueuedBytes(peer))
        execute(withCore { $0.receiveLink(message, from: peer, addr: addr, now: now, backlogged: backlogged, queued: { linkQueuedBytes($0) }) })
    }

    /// Aborts every link whose queue has passed `LinkBudget.hardLimitBytes`, or whose bytes waited
    /// (untaken, or at the backlog) for `LinkBudget.stallSeconds`, dropping what it queued; each
    /// is noted (`ShellNote.linkAborted`). Run by `tick`, at most once per `LinkBudget.checkInterval`.
    func closeStalledLinks(now: Double) {
        let due: LinkBudget? = withShellState { state in
            guard now >= state.budgetCheckedAt + state.linkBudget.checkInterval else { return nil }
            state.budgetCheckedAt = now
            return state.linkBudget
        }
        guard let budget = due else { return }
        for peer in linkedPeers() {
            let queued = linkQueuedBytes(peer)
            guard let refusal = budget.verdict(queuedBytes: queued, waited: linkWaited(peer)).refusal else { continue }
            noted(.linkAborted(peer: peer, refusal, queuedBytes: queued))
            abortLink(peer)
        }
    }
}
