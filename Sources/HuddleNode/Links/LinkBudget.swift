import HuddleCore

/// The byte budget of one link's outbox, the I/O buffer the shell owns for each peer.
///
/// What a peer can make this member queue for it is bounded: its requests for bulk answers
/// (chunks, repairs, push-pull state: `SessionCore.refusesWhileBacklogged`) are refused while
/// `backlogBytes` or more wait for it (`Refusal.outboxFull`; an honest peer asks again), so at most
/// about `backlogBytes` + one repair answer (`SessionCore.repairAnswerBytes`) + the chunk reads
/// in flight (`Journal.servesPerPeer`) wait at once. Everything else this member sends — its own
/// messages, digests, haves — is always queued: a budget never drops a reliable message. A link
/// whose writer takes nothing for the stall time while bytes wait (a peer that does not read) is
/// closed (`Refusal.stalledLink`); broadcasts queued on it are repaired once a link is back.
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
}

extension LinkHandle {
    /// Whether `LinkBudget.backlogBytes` or more wait for the peer.
    var isBacklogged: Bool { outbox.queuedBytes >= LinkBudget.backlogBytes }
}

extension Node {
    /// Closes every link on which bytes have waited, untaken, for `config.linkStallSeconds`
    /// (counted as `stalled_link`, the first one logged), dropping what it queued.
    func closeStalledLinks() {
        let limit = Duration.milliseconds(Int64(config.linkStallSeconds * 1000))
        for link in links.values {
            guard let since = link.outbox.waitingSince, ContinuousClock.now - since >= limit else { continue }
            if counters.refuse(.stalledLink) { logFirstRefusal(.stalledLink) }
            log.warning("closing the link to \(link.peer.id): \(link.outbox.queuedBytes) bytes waited \(config.linkStallSeconds) s without being read")
            link.abort()
        }
    }
}
