/// The budgets the session core holds every peer to, beyond those of the cores it owns (the
/// hold-back per origin in `CausalBroadcast`, the member table in `SWIMInstance`, chunk reads in
/// flight per peer and the store in `Journal`): the body limit on receive, requests refused while a
/// peer's link is backlogged, and the size of a repair answer.
extension SessionCore {
    /// Largest journal-entry body accepted from a peer. An honest entry is a manifest of at most
    /// 400 chunk hashes (100 MiB in 256 KiB chunks, 12.8 KB), 16 KiB of meta, a name and a key.
    public static let maximumJournalBody = 128 * 1024

    /// Most body bytes one repair answer carries (at least one message). A request costs its
    /// sender 40 bytes and may name 512 messages; this bounds what one request can queue.
    public static let repairAnswerBytes = 4 << 20

    /// Whether a received message's body is within this member's receive limit: the reliable
    /// limit plus the envelope allowance for messages, `maximumJournalBody` for journal entries.
    func fitsReceiveLimit(_ m: WireMessage) -> Bool {
        m.body.count <= (m.kind == .journal ? Self.maximumJournalBody : limits.reliable + Self.envelopeAllowance)
    }

    /// Link messages that ask this member to queue a bulk answer on the link — a chunk, stored
    /// messages, the whole membership state — refused while the link to their sender is
    /// backlogged. Each is asked again by an honest peer (chunk and repair timeouts, the next
    /// push-pull), so nothing is lost; a peer that asks without reading stops costing memory.
    /// A time request is small but refused too: its answer would queue behind the backlog, and
    /// measure that queue rather than the link (the peer asks again after `LinkTiming.interval`).
    public static func refusesWhileBacklogged(_ message: LinkMessage) -> Bool {
        switch message {
        case .chunkRequest, .request, .timeRequest: true
        // Only a push-pull's last part is answered (its earlier parts are merged only).
        case let .pushPull(state): !state.more
        default: false
        }
    }

    /// A `.refused` effect for each reason broadcast counted for the first time since `before`
    /// (its refusals before an input; compared reason by reason only when the total changed). The
    /// journal reports its own first refusals (`Journal.Effect.refused`); membership its own.
    func firstRefusals(since before: RefusalCounts) -> [SessionEffect] {
        let now = broadcast.refusals
        guard now.total != before.total else { return [] }
        return Refusal.allCases.filter { before[$0] == 0 && now[$0] > 0 }.map(SessionEffect.refused)
    }
}
