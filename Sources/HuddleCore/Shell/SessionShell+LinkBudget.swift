/// The link budget's two rules (`LinkBudget`), run once for both shells: a link's messages go to
/// the core told whether this end's queue to their sender is backlogged, and on every tick a link
/// the budget no longer allows is aborted.
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
    /// is noted (`ShellNote.linkAborted`). Run on every tick (`tick`).
    func closeStalledLinks() {
        let budget = withShellState { $0.linkBudget }
        for peer in linkedPeers() {
            let queued = linkQueuedBytes(peer)
            guard let refusal = budget.verdict(queuedBytes: queued, waited: linkWaited(peer)).refusal else { continue }
            noted(.linkAborted(peer: peer, refusal, queuedBytes: queued))
            abortLink(peer)
        }
    }
}
