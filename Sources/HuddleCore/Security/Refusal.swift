/// Why something a peer sent was refused. Every refusal is counted (`stats` shows the counts under
/// `refused`, keyed by `rawValue`) and the first of each reason is logged, so an attack is visible
/// without flooding the log.
public enum Refusal: String, CaseIterable, Sendable, Comparable {
    /// A membership record that would give a member id another node key.
    case keyChange = "key_change"
    /// A link whose handshake proved another node key than the one its member id is pinned to.
    case linkForPinnedMember = "link_for_pinned_member"
    /// A link whose own member record (sent in its handshake) names another node key than the one
    /// the handshake proved.
    case recordNodeKey = "record_node_key"
    /// A baseline or journal catch-up from a peer this member did not ask (or no longer waits for).
    case unsolicitedCatchUp = "unsolicited_catch_up"
    /// A journal entry announced by another member than the attachment's uploader.
    case journalNotByUploader = "journal_not_by_uploader"
    /// A journal `remove` announced by a member that neither uploaded the attachment nor is an
    /// admin, or carried by a catch-up (which names no one).
    case journalRemoveNotAllowed = "journal_remove_not_allowed"
    /// A membership record (`alive`, `left`) not signed by the member it is about.
    case unsignedRecord = "unsigned_record"
    /// A `suspect` or `failed` claim not signed by a known member.
    case unsignedClaim = "unsigned_claim"
    /// A `suspect` or `failed` claim about another member by a claimer this member holds failed or
    /// left: only a live member's claims count.
    case claimerNotLive = "claimer_not_live"
    /// A claim that would start a suspicion beyond its claimer's rate (`SWIMSettings.claimSuspicionsPerWindow`,
    /// one per subject within the suspicion's maximum timeout).
    case claimRate = "claim_rate"
    /// A claim about this member above its own incarnation (only it raises its incarnation).
    case claimAboveIncarnation = "claim_above_incarnation"
    /// A link from a peer that is not a member while `SessionCore.strangerLinkLimit` such links are up.
    case strangerLinks = "stranger_links"
    /// A datagram whose counter was already seen, or fell out of its sender's replay window.
    case replayedDatagram = "replayed_datagram"
    /// A request (chunk, repair, push-pull) from a peer whose link already has `LinkBudget.backlogBytes`
    /// queued: it is not answered (the peer asks again once its link drains).
    case outboxFull = "outbox_full"
    /// A link whose writer made no progress for the stall timeout while bytes waited: closed.
    case stalledLink = "stalled_link"
    /// An activity record whose Lamport time is more than `ActivityRegister.maximumSkew` ahead of
    /// this member's wall clock (it is taken once the clock reaches it).
    case activityAhead = "activity_ahead"
    /// A link closed because more than `LinkBudget.hardLimitBytes` waited for its peer to read.
    case linkOverflow = "link_overflow"
    /// A broadcast or directed message held back beyond its origin's hold-back budget
    /// (`CausalBroadcast.Settings.holdbackBytesPerOrigin`, `holdbackCountPerOrigin`); a broadcast
    /// is repaired later.
    case heldBytes = "held_bytes"
    /// A held-back message dropped because its origin delivered nothing here for
    /// `CausalBroadcast.Settings.heldExpiry` (a broadcast is repaired later if anyone stores it).
    case heldExpired = "held_expired"
    /// A message whose body is larger than this member's receive limit.
    case bodyTooLarge = "body_too_large"
    /// A new member while the membership table holds `SWIMSettings.memberLimit` members, none of
    /// them failed or left.
    case memberTableFull = "member_table_full"
    /// A chunk request from a peer that already has `Journal.servesPerPeer` chunk reads in flight here.
    case chunkRequests = "chunk_requests"
    /// A chunk not fetched or stored because the store would pass its limit.
    case storeFull = "store_full"
    /// A claim (`have`) that a peer holds a chunk it never served this member intact: not counted
    /// as a copy when a leaving member decides what to hand off.
    case unverifiedHolder = "unverified_holder"
    /// A datagram whose counter was more than `ReplayWindow.maximumJump` ahead of its sender's highest.
    case counterJump = "counter_jump"
    /// A datagram under the session key that the session-key form may not carry (anything but a
    /// bare ping or the ack to this member's probe), or from a member this member holds a link's
    /// datagram keys with (`SessionCore.receiveDatagram`).
    case unauthenticatedDatagram = "unauthenticated_datagram"
    /// A member record, link or `pingReq` that names an address other than a numeric IPv4 or
    /// [IPv6] `host:port` (`HostPort.numeric`): a hostname would make this member ask DNS for a peer.
    case hostnameAddress = "hostname_address"
    /// A `pingReq` beyond `SWIMInstance.maximumRelays` relays waiting at once.
    case pingReqOverflow = "ping_req_overflow"

    // Epoch changes, grants and old keys (issue 21; `EpochHistory`).

    /// A change or grant of another session (its session id is not ours).
    case epochOtherSession = "epoch_other_session"
    /// A change that breaks the record's rules: not canonical, epoch not its parent's plus one, the
    /// maker not on its own roster, removing someone on its roster.
    case epochMalformed = "epoch_malformed"
    /// A change whose signature is not its maker's.
    case epochBadSignature = "epoch_bad_signature"
    /// A change made by a node key that is not on its parent epoch's roster.
    case epochMakerNotOnRoster = "epoch_maker_not_on_roster"
    /// A change made by a node key removed before it (in the change's own history).
    case epochMakerRemoved = "epoch_maker_removed"
    /// A change made by a node key that is not an admin of its parent epoch, when the session has
    /// admins (`SessionKey.admins`, `EpochChange.admins`).
    case epochNotAdmin = "epoch_not_admin"
    /// A change whose admin set differs from its parent epoch's where none may differ: the session
    /// has no admins (none can be added), or the change would leave it without any (issue 33).
    case epochAdminsChanged = "epoch_admins_changed"
    /// A change that hands the key to a node key removed before it.
    case epochReaddsRemoved = "epoch_readds_removed"
    /// A change on top of an epoch that ended longer than the grace ago (or was forgotten).
    case epochStale = "epoch_stale"
    /// A third (or later) change by the same maker on the same parent, above the two lowest kept as
    /// the evidence of its equivocation.
    case epochEquivocation = "epoch_equivocation"
    /// A removed node key, with any key it holds.
    case removedNode = "removed_node"
    /// An old key whose holder was on neither that epoch's roster nor the next one's.
    case notOnRoster = "not_on_roster"
    /// A key of an epoch this member no longer keeps (older than the grace, or never known).
    case epochOutsideGrace = "epoch_outside_grace"
    /// A grant that is not for this member, not for the current head, or does not open and check.
    case epochBadGrant = "epoch_bad_grant"
    /// A broadcast of a removed member above its cut-off (the last seq the removing change lets
    /// count), or a directed message of a removed member: refused by every member (issue 33).
    case afterRemoval = "after_removal"

    // Participants (issue 38; `SessionCore+Participants`).

    /// A participant record about another member than the one whose link carried it.
    case participantsNotBySigner = "participants_not_by_signer"
    /// A participant record of a member that left or was removed.
    case participantsDeparted = "participants_departed"
    /// A participant record beyond the per-member budget (`ParticipantTable.maximumPerMember`
    /// programs, `maximumRecordBytes`).
    case participantBudget = "participant_budget"
    /// A participant record that names one program twice.
    case participantsMalformed = "participants_malformed"

    public static func < (a: Refusal, b: Refusal) -> Bool { a.rawValue < b.rawValue }
}

/// How many of each `Refusal` happened. Counts saturate at `Int.max` (they never trap).
public struct RefusalCounts: Sendable, Equatable {
    private var counts: [Refusal: Int] = [:]

    public init() {}

    public subscript(_ reason: Refusal) -> Int { counts[reason, default: 0] }

    /// Counts `n` refusals for `reason`; true when they are the first of that reason (log them).
    @discardableResult
    public mutating func add(_ reason: Refusal, _ n: Int = 1) -> Bool {
        let old = counts[reason, default: 0]
        let (sum, overflow) = old.addingReportingOverflow(max(0, n))
        counts[reason] = overflow ? .max : sum
        return old == 0 && n > 0
    }

    /// Every reason's count, this one's and `other`'s added.
    public func adding(_ other: RefusalCounts) -> RefusalCounts {
        var all = self
        for (reason, n) in other.counts { all.add(reason, n) }
        return all
    }

    /// All refusals of all reasons.
    public var total: Int {
        counts.values.reduce(0) { sum, n in
            let (next, overflow) = sum.addingReportingOverflow(n)
            return overflow ? .max : next
        }
    }
}
