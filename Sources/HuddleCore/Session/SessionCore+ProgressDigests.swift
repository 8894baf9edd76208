/// Digests sent early to an origin that streams (issue 36, the relay's memory; issue 40).
///
/// A sender's broadcasts count against its store until every member has acknowledged them, and
/// its sends wait while the store is full (`CausalBroadcast.isCongested`); members acknowledge in
/// digests, every `digestInterval`. So a stream's window is the store limit, and at the interval
/// alone a fast stream spends part of each round waiting for the next digest. Here a member that
/// has delivered `progressDigestBytes` of one origin's broadcasts since it last told it sends that
/// origin its digest at once, at most every `progressDigestGap` per origin: the origin learns what
/// its members delivered without waiting for their next periodic digest (it collects what all have
/// at most every `pressedCollectInterval` under pressure), so the store limit can be small without
/// slowing a stream that everyone keeps up with. (What a small limit saves at a member that is not
/// the origin — a relay that is also a member, with the stream's other member behind it, holds
/// the whole window — comes from the limit itself: early digests go to the origin alone.)
///
/// Guarantees (pure): an early digest goes only to the origin itself, only over a link that is
/// up, at most once per `progressDigestGap` per origin; a quiet or slow stream adds nothing (below
/// `progressDigestBytes` per interval the periodic digest is the only one); both tables hold at
/// most one entry per member.
extension SessionCore {
    /// Bytes of one origin's broadcasts delivered here that make an early digest due: a sixteenth
    /// of this member's store limit (the origins' are the same unless a test sets them apart), so
    /// an origin's store drains in steps well under its limit.
    public var progressDigestBytes: Int { max(1, broadcast.settings.storeLimitBytes / 16) }
    /// The shortest time between two early digests to one origin (50 a second at most).
    public static let progressDigestGap = 0.02

    /// Counts a delivered broadcast of its origin towards an early digest.
    mutating func noteDelivered(_ message: WireMessage) {
        guard message.seq != 0 else { return }  // directed messages are acknowledged on their own (`directedAck`)
        let threshold = progressDigestBytes
        let bytes = min(deliveredSinceDigest[message.origin] ?? 0, threshold) + message.body.count
        deliveredSinceDigest[message.origin] = bytes
        if bytes >= threshold { progressDigestDue = true }
    }

    /// The early digests due at `now` (see the type's comment).
    mutating func progressDigests(now: Double) -> [SessionEffect] {
        guard progressDigestDue else { return [] }
        let threshold = progressDigestBytes
        var due: [MemberID] = [], waiting = false
        for (origin, bytes) in deliveredSinceDigest where bytes >= threshold {
            guard now >= (progressDigestAt[origin] ?? -.infinity) + Self.progressDigestGap else { waiting = true; continue }
            due.append(origin)
        }
        progressDigestDue = waiting
        guard !due.isEmpty else { return [] }
        if progressDigestAt.count > swim.members.count {
            progressDigestAt = progressDigestAt.filter { swim.members[$0.key] != nil }
        }
        let digest = LinkMessage.digest(broadcast.digest(), activity: activity.stamp)
        var out: [SessionEffect] = []
        for origin in due.sorted() {
            deliveredSinceDigest[origin] = nil
            guard planner.linked.contains(origin) else { continue }
            progressDigestAt[origin] = now
            out.append(.sendLink(origin, digest))
        }
        return out
    }
}
