/// The attachment pipeline's inputs (issue 35: one core call per input). The shell reads, writes
/// and hashes chunk bodies off its actor and reports each outcome here; every rule about what
/// follows — the hash check's consequences, admission to the store, the bookkeeping of reads in
/// flight, the next requests — is decided here, once, for the node and the simulator alike.
///
/// Guarantees:
/// - a chunk body counts as held only once the shell says it was written (`chunkWritten`), so a
///   slot half written is never served;
/// - a body whose hash fails the manifest is never stored: its sender is told (`chunkCorrupt`) and
///   never asked for that chunk again, and another holder is asked at once;
/// - every admitted read for a peer ends exactly once (`chunkRead`, or `chunkServeDropped` when
///   the shell could not start it), so `Journal.servesPerPeer` stays exact;
/// - an arrival or a write frees a request slot: the next requests go out at once.

/// What the shell does with a chunk body that arrived (`SessionCore.chunkArrived`).
public enum ChunkArrival: Sendable, Equatable {
    /// Intact, new here and admitted to the store: write it under `manifest`, then report
    /// `chunkWritten`.
    case write(Manifest)
    /// Its hash does not match the manifest: not stored; its sender was told.
    case corrupt
    /// Intact, not stored: held already, being written, or refused by the store limit.
    case dropped
    /// Of an attachment (or a chunk index) this member does not know, or removed: not checked.
    case unknown
}

/// What the shell does with a chunk it read for a peer (`SessionCore.chunkRead`).
public enum ChunkServe: Sendable, Equatable {
    /// Send it: the read was counted as served.
    case send
    /// The attachment was removed, or the chunk dropped as damaged, while it was read: not sent.
    case notHeld
    /// Missing from the store: not sent; the chunk is fetched again.
    case missing
}

extension SessionCore {
    /// A chunk body arrived from `peer` (asked for, or pushed by a leaving member) with its
    /// BLAKE2b `hash`, computed by the shell off its actor.
    public mutating func chunkArrived(id: String, index: Int, hash: [UInt8], from peer: MemberID, now: Double) -> (ChunkArrival, [SessionEffect]) {
        guard let record = journal.records[id], !record.removed, index >= 0, index < record.manifest.chunkCount else { return (.unknown, []) }
        guard hash == record.manifest.chunkHashes[index] else {
            _ = journal.chunkArrived(id, index, from: peer, valid: false)
            return (.corrupt, [.sendLink(peer, .chunkCorrupt(id: id, index: UInt32(index)))] + chunkRequests(now: now))
        }
        guard !journal.holds(id, index) else {
            _ = journal.chunkArrived(id, index, from: peer, valid: true)
            return (.dropped, chunkRequests(now: now))
        }
        // The store limit, checked before the write: a hand-off pushed unasked must fit it.
        let admit = journal.admitChunk(id, index, now: now)
        return (admit.admitted ? .write(record.manifest) : .dropped, admit.effects.map(SessionEffect.journal))
    }

    /// The write `chunkArrived` asked for ended (`failed`: it did not reach the store). `stored`:
    /// the chunk is held now (new here, its attachment not removed meanwhile, the write done).
    public mutating func chunkWritten(id: String, index: Int, from peer: MemberID, failed: Bool, now: Double) -> (stored: Bool, effects: [SessionEffect]) {
        // Removed while the write ran: the write may have made the attachment's file again.
        guard let record = journal.records[id], !record.removed else { return (false, [.journal(.deleteStored(id: id))] + chunkRequests(now: now)) }
        guard journal.chunkArrived(id, index, from: peer, valid: true) else { return (false, chunkRequests(now: now)) }
        if failed {
            journal.lost(id, index)
            return (false, chunkRequests(now: now))
        }
        return (true, journal.stored(id, now: now).map(SessionEffect.journal) + chunkRequests(now: now))
    }

    /// A chunk read for `peer` (after `.serveChunk`) ended: `found` when the store had it.
    public mutating func chunkRead(id: String, index: Int, found: Bool, for peer: MemberID, now: Double) -> ChunkServe {
        guard journal.holds(id, index) else {
            journal.serveEnded(to: peer)
            return .notHeld
        }
        guard found else {
            journal.serveEnded(to: peer)
            journal.lost(id, index)
            return .missing
        }
        journal.served(id, index, to: peer, now: now)
        return .send
    }

    /// A `.serveChunk` the shell could not start (no link to the peer any more, or the attachment is
    /// gone): the admitted read ends.
    public mutating func chunkServeDropped(to peer: MemberID) { journal.serveEnded(to: peer) }

    /// Chunks this member held of `id` are gone or damaged (found by a check of the stored copy, or
    /// by a read that failed): they are fetched again. Returns how many were held.
    public mutating func chunksLost(id: String, _ indices: [Int], now: Double) -> (dropped: Int, effects: [SessionEffect]) {
        var dropped = 0
        for index in indices where journal.holds(id, index) {
            journal.lost(id, index)
            dropped += 1
        }
        return (dropped, dropped > 0 ? chunkRequests(now: now) : [])
    }

    /// A chunk found in the store from an earlier run of this member, its hash checked against the
    /// manifest by the shell (CONTROL.md, Restart): held again without being fetched.
    public mutating func chunkRecovered(id: String, index: Int, now: Double) -> [SessionEffect] {
        journal.recovered(id, index, now: now).map(SessionEffect.journal)
    }

    /// Requests to holders, up to each one's window (also made on every journal tick).
    public mutating func chunkRequests(now: Double) -> [SessionEffect] {
        journal.requests(now: now).map(SessionEffect.journal)
    }

    /// A graceful leave's hand-off: this member's batch goes first (an announcement must reach the
    /// peers before its chunks do: a chunk of an attachment a peer does not know is dropped there),
    /// then the plan — each chunk no other live member is proven to hold, to the live linked members
    /// in turn. The shell reads and pushes the planned chunks, then waits (bounded) for `handedOff`.
    public mutating func handOff() -> (plan: [(peer: MemberID, id: String, index: Int)], effects: [SessionEffect]) {
        let peers = linkedLive
        guard !peers.isEmpty else { return ([], []) }
        let flushed = flushBatch()
        let (plan, effects) = journal.handOffPlan(to: peers)
        return (plan, flushed + effects.map(SessionEffect.journal))
    }

    /// How many of the pushed chunks another live member now holds.
    public func handedOff(_ pushed: [(id: String, index: Int)]) -> Int { journal.handedOff(pushed) }
}
