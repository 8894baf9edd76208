/// This member's own reliable directed messages (`send` with `to`), kept per recipient until that
/// recipient acknowledges them (`LinkMessage.directedAck`), so that a link that closes and forms
/// again — a relayed link whose circuit closed, a move from the relay to a direct path — loses none
/// of them: the link-up sends every one not yet acknowledged again, in the order they were made,
/// before anything newer (`SessionCore.linkEstablished`). Directed messages have no broadcast seq,
/// so the broadcast's repair cannot bring them back; before this, what a closing link had queued
/// was lost without a word to the sender (issue 36, the reach benchmark's directed row).
///
/// Guarantees (pure):
/// - per recipient, messages are kept in the order they were handed in (their counters ascend);
/// - an acknowledgement drops only that recipient's messages up to the counter it names (a peer
///   can only give up what was sent to it);
/// - `bytes` counts every kept copy (a message to two recipients counts twice) by the size the
///   caller gives, and is what makes sends wait (`CausalBroadcast.isCongested`): so what waits here
///   for a slow or unlinked recipient is bounded, and a sender faster than its recipient's path
///   (a relay's budget) is slowed instead of its messages piling up in a link's queue;
/// - sends wait once `limitBytes` are kept (`isFull`), however much room the broadcast's store has:
///   each kept message is also queued, encoded, on the link to its recipient until written, so what
///   a sender of directed messages holds about twice what waits here (bounded by the store's
///   8 MiB alone, up to 16 MiB of them);
/// - a recipient that is no longer a live member has its messages dropped (`keepOnly`) and counted.
public struct DirectedOutbox: Sendable {
    /// Bytes kept at which this member's sends wait (`isFull`). Well over what an acknowledgement
    /// round takes at a relay's budget or a loopback link's rate (a recipient acknowledges every
    /// `SessionCore.journalInterval`: 4 MiB in 50 ms is 80 MiB/s).
    public static let limitBytes = 4 << 20
    private var waiting: [MemberID: [(signed: SignedMessage, size: Int)]] = [:]
    public private(set) var bytes = 0
    /// Messages dropped because their recipient stopped being a live member.
    public private(set) var dropped = 0

    public init() {}

    /// Keeps `signed` for each of `recipients` until it acknowledges it.
    public mutating func keep(_ signed: SignedMessage, for recipients: [MemberID], size: Int) {
        for recipient in Set(recipients) {
            waiting[recipient, default: []].append((signed, size))
            bytes += size
        }
    }

    /// `recipient` has delivered this member's directed messages up to `counter`.
    public mutating func acknowledged(by recipient: MemberID, through counter: UInt64) {
        guard let list = waiting[recipient] else { return }
        let done = list.prefix { $0.signed.message.counter <= counter }
        guard !done.isEmpty else { return }
        bytes -= done.reduce(0) { $0 + $1.size }
        waiting[recipient] = done.count == list.count ? nil : Array(list.dropFirst(done.count))
    }

    /// What `recipient` has not acknowledged, oldest first.
    public func unacknowledged(for recipient: MemberID) -> [SignedMessage] {
        waiting[recipient]?.map(\.signed) ?? []
    }

    /// Whether `limitBytes` or more wait for acknowledgement: sends wait (`CausalBroadcast.isCongested`).
    public var isFull: Bool { bytes >= Self.limitBytes }

    /// Messages waiting for `recipient`.
    public func count(for recipient: MemberID) -> Int { waiting[recipient]?.count ?? 0 }

    /// Drops what waits for members not in `live`.
    public mutating func keepOnly(_ live: Set<MemberID>) {
        for (recipient, list) in waiting where !live.contains(recipient) {
            bytes -= list.reduce(0) { $0 + $1.size }
            dropped &+= list.count
            waiting[recipient] = nil
        }
    }
}
