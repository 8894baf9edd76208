import HuddleCore

/// The byte budget of one link's outbox, the I/O buffer the shell owns for each peer.
///
/// What a peer can make this member queue for it is bounded: its requests for bulk answers
/// (chunks, repairs, push-pull state: `SessionCore.refusesWhileBacklogged`) are refused while
/// `backlogBytes` or more wait for it (`Refusal.outboxFull`; an honest peer asks again), so at most
/// about `backlogBytes` + one repair answer (`SessionCore.repairAnswerBytes`) + the chunk reads
/// in flight (`Journal.servesPerPeer`) wait at once. Everything else this member sends — its own
/// messages, digests, haves — is always queued: a budget never drops a reliable message. A link
/// whose writer takes nothing for the stall time while bytes wait (a peer that does not read), or
/// whose backlog stays at `backlogBytes` or more for that time whatever it takes (a peer that reads
/// a little now and then: 1 MiB every 59 s used to keep a link open for ever), is closed
/// (`Refusal.stalledLink`); so is one whose queue passes `hardLimitBytes` at once
/// (`Refusal.linkOverflow`). Broadcasts queued on it are repaired once a link is back.
enum LinkBudget {
    /// Bytes queued for a peer at which its requests for bulk answers are refused. Far above what
    /// an honest fetcher keeps in flight (3 chunks per attachment, 768 KiB).
    static let backlogBytes = 4 << 20
    /// Most bytes of link messages the writer takes from the outbox for one write (at least one
    /// message), so the encrypted buffer of a write is bounded however much is queued: taking
    /// everything, a sender of 16 KiB broadcasts had 34 MiB of write buffers at once across its
    /// 3 links (heaptrack). A megabyte per write still fills the socket buffer in a few writes.
    static let writeBatchBytes = 1 << 20
    /// How long bytes may wait on a link whose writer takes nothing before it is closed. Longer
    /// than any pause a live member survives (a paused member is failed, and its link closed, in
    /// seconds), so only a peer that keeps its link open without reading meets it.
    static let defaultStallSeconds = 60.0
    /// Bytes queued for one peer at which its link is closed at once. What an honest peer can
    /// make wait is bounded well below it: requests for bulk answers stop at `backlogBytes`, and
    /// this member's own broadcasts by the store limit (8 MiB of unacknowledged messages).
    static let hardLimitBytes = 64 << 20
}

extension LinkHandle {
    /// Whether `LinkBudget.backlogBytes` or more wait for the peer.
    var isBacklogged: Bool { outbox.queuedBytes >= LinkBudget.backlogBytes }
}

extension Node {
    /// Closes every link on which bytes have waited, untaken (or with `backlogBytes` still
    /// queued), for `config.linkStallSeconds` (counted as `stalled_link`, the first one logged),
    /// and every link with more than `hardLimitBytes` queued (`link_overflow`), dropping what it queued.
    func closeStalledLinks() {
        let limit = Duration.milliseconds(Int64(config.linkStallSeconds * 1000))
        for link in links.values {
            if link.outbox.queuedBytes > LinkBudget.hardLimitBytes {
                if counters.refuse(.linkOverflow) { logFirstRefusal(.linkOverflow) }
                log.warning("closing the link to \(link.peer.id): \(link.outbox.queuedBytes) bytes queued, more than \(LinkBudget.hardLimitBytes)")
                link.abort()
                continue
            }
            guard let since = link.outbox.waitingSince, ContinuousClock.now - since >= limit else { continue }
            if counters.refuse(.stalledLink) { logFirstRefusal(.stalledLink) }
            log.warning("closing the link to \(link.peer.id): \(link.outbox.queuedBytes) bytes waited \(config.linkStallSeconds) s without being read")
            link.abort()
        }
    }
}
