import HuddleCore

/// What a task on the node can wait for. The node wakes a reason whenever it may have come about;
/// a woken task checks its own condition again (so a spurious wake costs one check, never a poll).
enum WaitReason: Hashable, Sendable {
    /// Attachment `id` completed, changed state or was removed.
    case attachment(String)
    /// The push-pull reply from a peer arrived, or its link closed.
    case pushPullReply(MemberID)
    /// Retransmit buffers drained (`SessionEffect.congestionCleared`).
    case congestion
    /// A peer said what it holds (`have`), or a link closed: a hand-off may be confirmed.
    case handOff
    /// A link closed.
    case linkClosed
    /// The node has left.
    case stopped
    /// The epoch moved here, or a peer said which epoch it is on.
    case epoch
    /// A peer answered a time request (`LinkTiming`).
    case timing
    /// A commit of the data directory's state completed (or failed).
    case committed
}

/// One task waiting on the node: how `wake`, its deadline and its cancellation find it.
struct Waiter {
    let id: UInt64
    let continuation: CheckedContinuation<Void, Never>
}

extension Node {
    /// Suspends until `reason` is woken, `deadline` (when given) passes, the calling task is
    /// cancelled, or the node stops. A wait never outlives the node: once it has stopped (or the
    /// task is cancelled) every wait returns at once, so a loop that waits must also test
    /// `mayWait` or it spins.
    func wait(for reason: WaitReason, until deadline: ContinuousClock.Instant? = nil) async {
        guard mayWait else { return }
        let id = nextWaiterID
        nextWaiterID &+= 1
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                guard !Task.isCancelled else { return continuation.resume() }
                waiters[reason, default: []].append(Waiter(id: id, continuation: continuation))
                guard let deadline else { return }
                // The timer is one of the node's tasks; once the node has stopped there is none,
                // and the wait ends now rather than never.
                let scheduled = spawner.spawn { [self] in
                    try? await Task.sleep(until: deadline)
                    await endWait(reason, id)
                }
                if !scheduled { endWait(reason, id) }
            }
        } onCancel: {
            Task { await self.endWait(reason, id) }
        }
    }

    /// Whether a wait can still last: the node has not stopped and the task is not cancelled.
    var mayWait: Bool { !stopped && !Task.isCancelled }

    func wake(_ reason: WaitReason) {
        for waiter in waiters.removeValue(forKey: reason) ?? [] { waiter.continuation.resume() }
    }

    /// Ends one wait (its deadline passed or its task was cancelled), if it is still waiting.
    private func endWait(_ reason: WaitReason, _ id: UInt64) {
        guard let index = waiters[reason]?.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiters[reason]?.remove(at: index)
        if waiters[reason]?.isEmpty == true { waiters[reason] = nil }
        waiter?.continuation.resume()
    }

    /// Ends every wait (the node has stopped).
    func endAllWaits() {
        let all = waiters
        waiters = [:]
        for waiter in all.values.joined() { waiter.continuation.resume() }
    }
}
