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
}

extension Node {
    /// Suspends until `reason` is woken, or `deadline` (when given) passes, which wakes every
    /// waiter of `reason` (each re-checks its condition).
    func wait(for reason: WaitReason, until deadline: ContinuousClock.Instant? = nil) async {
        if let deadline {
            spawner.spawn { [self] in
                try? await Task.sleep(until: deadline)
                await wake(reason)
            }
        }
        await withCheckedContinuation { waiters[reason, default: []].append($0) }
    }

    func wake(_ reason: WaitReason) {
        for waiter in waiters.removeValue(forKey: reason) ?? [] { waiter.resume() }
    }
}
