import HuddleCrypto

/// Epochs in the session (issue 21): the rules that join `EpochHistory` to links, membership,
/// broadcast and the journal. The history itself (which changes count, fork choice, grace, who may
/// come back with an old key) is `EpochHistory`'s; see the note at the top of EpochHistory.swift.
///
/// - **How a change travels: flooded over links.** The member that makes a change sends it on
///   every link; every member that a change moves passes it on, at once, on every link except the
///   one it came from (and except peers that said they are on that head already), then tells every
///   link its new head (`epochHead`). Links are reliable and ordered, so every member linked to one
///   that moved receives it; a member that was not linked then (paused, partitioned, restarted) is
///   handed what it misses when its next link comes up: each side sends its head right after the
///   hello, and a peer whose head differs (or who lacks the head's key) is sent the winning
///   changes after the epoch its link's key proved, and a grant when the current roster leaves it
///   out (`EpochHistory.handover`). A causal broadcast would add nothing: a change is signed by
///   its maker already, every member must act on it at once (not after its causal predecessors),
///   and a restarted member (a new member id) or a joiner never receives broadcasts from before
///   its baseline — it needs the hand-over on link-up anyway.
/// - **A link is admitted by the key it proved** (`admitEpoch`): the current key, or an older
///   one within the grace held by a node key on that epoch's roster (or the next's) and never
///   removed; a removed node key never, with any key.
/// - **Moving** (`epochMoved`): the shell switches to the new key (new links, session-key
///   datagrams, the key file). Links already up stay up: their transport keys come from their own
///   ephemeral Diffie–Hellman, which no holder of the session key, old or new, can compute.
/// - **Removal** (`evict`): a member whose node key is removed leaves `live` at once (broadcast
///   stops waiting for its acknowledgements, the journal stops counting it as a holder), its links
///   are closed, its link datagram keys dropped, its session-key datagrams refused, and every later
///   record about it is ignored. Its broadcasts up to the cut-off the removing change carries (the
///   highest of them its maker had delivered) are still relayed (repair) and delivered everywhere:
///   others' messages may depend on them; every later one, relayed by anyone, is refused
///   (`syncCutoffs`, `EpochHistory+Cutoffs`).
/// - **This member removed**: it closes every link and decides nothing more (`tick`, links and
///   datagrams are ignored); its handshake has no key left to offer.
extension SessionCore {
    /// The key a core made without one starts from (tests that do not look at epochs).
    static var placeholderKey: SessionKey {
        (try? SessionKey(bytes: [UInt8](repeating: 0, count: SessionKey.length))) ?? SessionKey.generate()
    }

    /// The keys a link handshake may use now, the current one first (`EpochHistory.handshakeKeys`);
    /// none once this member is removed.
    public func handshakeKeys(now: Double) -> [SessionKey] {
        epochs.isRemoved ? [] : epochs.handshakeKeys(now: now)
    }

    /// The seals of earlier epochs' session-key datagrams this member still opens: the newest
    /// `DatagramOpener.maximumOlderSeals` of the keys within their grace, after the current one.
    public func olderDatagramSeals(now: Double) -> [DatagramSeal] {
        handshakeKeys(now: now).dropFirst().prefix(DatagramOpener.maximumOlderSeals).map { DatagramSeal(key: $0.subkey(.datagram)) }
    }

    /// Most session keys a dialer tries, newest first: the peer may not have heard of the newest
    /// epoch yet (it is handed it once linked).
    public static let dialKeyLimit = 3

    /// The keys a dialer tries in turn, one handshake each: the newest `dialKeyLimit` of
    /// `handshakeKeys` (a responder tries every key it holds on the first message).
    public func dialKeys(now: Double) -> [SessionKey] { Array(handshakeKeys(now: now).prefix(Self.dialKeyLimit)) }

    /// The epoch the session is on here.
    public var epoch: UInt64 { epochs.epoch }

    /// Whether a link whose handshake proved the key of epoch `keyHead` (nil: the current one) may
    /// serve `peer`: the epoch rules' admission; a refusal is counted by its reason.
    public mutating func admitEpoch(_ peer: MemberInfo, keyHead: [UInt8]?, now: Double) throws(CoreError) {
        if epochs.isRemoved { throw .linkRefusedByEpoch(.removedNode) }
        let head = keyHead ?? epochs.head
        let admission = epochs.admission(of: peer.node, holding: head, now: now)
        if case let .refused(reason) = admission {
            ownRefusals.add(reason)
            throw .linkRefusedByEpoch(reason)
        }
        epochLinks[peer.id] = (peer.node, head)
        epochs.observe(peer.node, now: now)
        if admission == .current { epochs.vouch(peer.node, holding: head) }
    }

    /// What goes on a link right after its hello: this member's head, and what a peer whose link
    /// proved an older key needs (the changes after it, and a grant).
    public mutating func epochLinkUp(_ peer: MemberID, now: Double) -> [SessionEffect] {
        var out: [SessionEffect] = [.sendLink(peer, headMessage)]
        if let link = epochLinks[peer], link.keyHead != epochs.head { out += handover(to: peer, now: now) }
        // The evidence against every equivocator this member knows (bounded by `maxEvidence`): a
        // member that was not linked when it was found holds it too.
        out += epochs.equivocations.flatMap { [$0.first, $0.second] }.map { .sendLink(peer, .epochChanges([$0])) }
        return out
    }

    private var headMessage: LinkMessage {
        .epochHead(epoch: epochs.epoch, head: epochs.head, holdsKey: epochs.current != nil)
    }

    // MARK: making changes

    /// Rotates the session key, removing nobody (`rekey`, `--rekey-every`). Returns the change (its
    /// epoch is the new one) and what to do: send it on every link, switch to its key.
    public mutating func rekey(now: Double) throws(CoreError) -> (EpochChange, [SessionEffect]) {
        try make(removing: [], now: now)
    }

    /// Removes `nodes` (node keys) for good and rotates the key to everyone else (`remove`).
    public mutating func remove(nodes: [[UInt8]], now: Double) throws(CoreError) -> (EpochChange, [SessionEffect]) {
        guard !nodes.isEmpty else { throw .nobodyToRemove }
        return try make(removing: nodes, now: now)
    }

    /// Moves the session to a new epoch whose admin set is `admins` (issue 33; only an admin, only in
    /// a session with admins, never to none): `EpochHistory.changeAdmins`.
    public mutating func changeAdmins(to admins: [[UInt8]], now: Double) throws(CoreError) -> (EpochChange, [SessionEffect]) {
        try make(removing: [], admins: admins, now: now)
    }

    private mutating func make(removing nodes: [[UInt8]], admins: [[UInt8]]? = nil, now: Double) throws(CoreError) -> (EpochChange, [SessionEffect]) {
        let before = epochs.head
        let members = epochMembers
        var rng = epochRandom
        defer { epochRandom = rng }
        let change: EpochChange
        do {
            if let admins {
                change = try epochs.changeAdmins(to: admins, members: members, origins: epochOrigins, now: now, using: &rng)
            } else if nodes.isEmpty {
                change = try epochs.rekey(members: members, origins: epochOrigins, now: now, using: &rng)
            } else {
                change = try epochs.remove(nodes, members: members, origins: epochOrigins, now: now, using: &rng)
            }
        } catch {
            if error.code == .notAdmin { ownRefusals.add(.epochNotAdmin) }
            throw error
        }
        return (change, made(change, previous: before, now: now))
    }

    /// What follows a change this member made: the move to it when it won, and the change itself on
    /// every link whatever the fork choice made of it (a locked-out member's removal made on the
    /// epoch before can lose to the head, and still counts everywhere: its removals are never lost).
    mutating func made(_ change: EpochChange, previous: [UInt8], now: Double) -> [SessionEffect] {
        var out: [SessionEffect]
        if epochs.head != previous, let key = epochs.current {
            out = epochMoved(key, previous: previous, from: nil, now: now)
        } else {
            out = applyRemovals(now: now)
        }
        if !epochs.chain.contains(change.hash) { out.append(.sendToLinks(.epochChanges([change]))) }
        return out
    }

    /// The node keys of every member this member knows (any state: a member that failed or left may
    /// come back with its key file) and of peers linked before they are members (a joiner), not
    /// removed, self excluded; in member order.
    var epochMembers: [[UInt8]] {
        let known = swim.members.values.filter { $0.id != local }.sorted { $0.id < $1.id }.map(\.node)
        let joining = epochLinks.filter { swim.members[$0.key] == nil }.sorted { $0.key < $1.key }.map(\.value.node)
        return (known + joining).filter { epochs.removedNodes[$0] == nil }
    }

    /// Every origin this member knows, with its node key and the highest broadcast of it delivered
    /// here: the cut-offs a change carries for the node keys it removes (`EpochHistory+Cutoffs`).
    var epochOrigins: [EpochChange.Cutoff] {
        swim.members.values.filter { $0.id != local }.map { EpochChange.Cutoff(origin: $0.id, node: $0.node, seq: broadcast.delivered[$0.id] ?? 0) }
    }

    /// Delayed changes now due, routine rotation, re-issued removals and a locked-out member's
    /// counter-change that are due.
    mutating func epochTick(now: Double) -> [SessionEffect] {
        dueHandovers(now: now) + epochWork(now: now)
    }

    /// A due release of delayed changes, re-issue, counter or routine rotation (from `epochTick`).
    private mutating func epochWork(now: Double) -> [SessionEffect] {
        let before = epochs.head
        if let due = epochs.nextRelease, now >= due {
            return epochOutcome(epochs.releaseDelayed(now: now), previous: before, from: nil, now: now)
        }
        if let deadline = epochs.reissueDeadline, now >= deadline,
           let change = epochs.reissue(members: epochMembers, origins: epochOrigins, now: now, using: &epochRandom) {
            return made(change, previous: before, now: now)
        }
        if let deadline = epochs.counterDeadline, now >= deadline,
           let change = epochs.counter(members: epochMembers, origins: epochOrigins, now: now, using: &epochRandom) {
            return made(change, previous: before, now: now)
        }
        guard now >= rekeyAt else { return [] }
        do { return try rekey(now: now).1 } catch {
            // Not this member's to make (not an admin, not on the roster, waiting for a grant):
            // another member rotates, or this one tries again after another period.
            scheduleRekey(now: now)
            return []
        }
    }

    /// When `tick` has epoch work next: a due re-issue or rotation.
    var epochDeadline: Double {
        min(epochs.nextRelease ?? .infinity, epochs.reissueDeadline ?? .infinity, epochs.counterDeadline ?? .infinity, rekeyAt,
            handoversDue.values.min() ?? .infinity)
    }

    /// Rotates the key routinely every `seconds` (and up to a quarter more) from `now` on; nil: never.
    public mutating func rotate(every seconds: Double?, now: Double) {
        rekeyEvery = seconds
        scheduleRekey(now: now)
    }

    /// Sets the next routine rotation, `rekeyEvery` (and up to a quarter more) after `now`.
    mutating func scheduleRekey(now: Double) {
        guard let every = rekeyEvery, every > 0 else { rekeyAt = .infinity; return }
        let spread = Double(epochRandom.next() >> 11) / Double(1 << 53)
        rekeyAt = now + every * (1 + spread / 4)
    }

    // MARK: receiving

    /// Epoch changes a peer sent (made, passed on, or handed over).
    mutating func receiveEpochChanges(_ changes: [EpochChange], from peer: MemberID, now: Double) -> [SessionEffect] {
        var out: [SessionEffect] = []
        for change in changes {
            let before = epochs.head
            let evidence = epochs.equivocators.count
            let receipt = epochs.receive(change, now: now)
            if case .moved = receipt, epochs.head == change.hash { peerHeads[peer] = change.hash }
            out += epochOutcome(receipt, previous: before, from: peer, now: now)
            // A maker just proven to equivocate: its two changes go to every link, so every member
            // holds the evidence and excludes it (a losing twin is not on the winning branch, which
            // is all that is forwarded otherwise).
            if epochs.equivocators.count > evidence, let proof = epochs.equivocations.last {
                out += [proof.first, proof.second].map { .sendToLinks(.epochChanges([$0])) }
            }
        }
        return out
    }

    /// A peer's head: a peer on another head than this member's, or without its key, is handed
    /// what this member can give it (nothing when its link's key is not admitted any more) — once
    /// per `handoverInterval` for the same two heads: a member repeating its head cannot make this
    /// one seal grants and resend changes at the rate it sends (links are reliable: what was
    /// handed arrives; a new link hands over again at link-up).
    mutating func receiveEpochHead(_ head: [UInt8], holdsKey: Bool, from peer: MemberID, now: Double) -> [SessionEffect] {
        peerHeads[peer] = head
        peerHoldsKey[peer] = holdsKey
        guard head != epochs.head || !holdsKey else {
            handoversDue[peer] = nil
            return []
        }
        if let last = headHandovers[peer], now - last.at < Self.handoverInterval {
            // One hand-over per peer per interval: heads that differ each time (a member can name
            // any bytes) once made every 40-byte `epochHead` cost the changes, a sealed grant and
            // its X25519 work. A different head waits for the interval's end, never dropped.
            if last.theirs != head || last.mine != epochs.head { handoversDue[peer] = last.at + Self.handoverInterval }
            return []
        }
        handoversDue[peer] = nil
        headHandovers[peer] = (head, epochs.head, now)
        return handover(to: peer, now: now)
    }

    /// How often one peer is handed changes and a grant at most (a repeated head gets nothing more).
    static let handoverInterval = 2.0

    /// The hand-overs that waited for their interval's end (`receiveEpochHead`) and are due, to
    /// peers still behind this member's head or without its key.
    mutating func dueHandovers(now: Double) -> [SessionEffect] {
        var out: [SessionEffect] = []
        for (peer, due) in handoversDue.sorted(by: { $0.key < $1.key }) where now >= due {
            handoversDue[peer] = nil
            guard let head = peerHeads[peer], head != epochs.head || peerHoldsKey[peer] != true else { continue }
            headHandovers[peer] = (head, epochs.head, now)
            out += handover(to: peer, now: now)
        }
        return out
    }

    /// The hand-over to a linked peer by the key its link proved: the changes, one per message, and the grant.
    mutating func handover(to peer: MemberID, now: Double) -> [SessionEffect] {
        guard let link = epochLinks[peer],
              let handover = epochs.handover(to: link.node, holding: link.keyHead, now: now, using: &epochRandom) else { return [] }
        var out = handover.changes.map { SessionEffect.sendLink(peer, .epochChanges([$0])) }
        if let grant = handover.grant { out.append(.sendLink(peer, .epochGrant(grant))) }
        return out
    }

    /// What a receipt from `source` (nil: this member) means for the session.
    mutating func epochOutcome(_ receipt: EpochReceipt, previous: [UInt8]? = nil, from source: MemberID?, now: Double) -> [SessionEffect] {
        switch receipt {
        case let .refused(reason): return refuse(reason)
        case .duplicate, .waiting: return []
        case .recorded: return applyRemovals(now: now)
        case .notHanded:
            // Peers see this member on the head without its key and hand it a grant.
            return applyRemovals(now: now) + [.sendToLinks(headMessage)]
        case let .moved(key): return epochMoved(key, previous: previous, from: source, now: now)
        case let .removed(by): return removedHere(by: by, now: now)
        }
    }

    /// This member moved to `key`'s epoch: the shell switches; the changes that moved it go on to
    /// every link but `source` (and peers already on the head); every link hears the new head;
    /// removals take effect.
    mutating func epochMoved(_ key: SessionKey, previous: [UInt8]?, from source: MemberID?, now: Double) -> [SessionEffect] {
        scheduleRekey(now: now)
        var out: [SessionEffect] = [.epochMoved(key)]
        let fresh = epochs.changes(after: previous ?? epochs.head)
        for peer in planner.linked.sorted() where peer != source && peerHeads[peer] != epochs.head {
            out += fresh.map { .sendLink(peer, .epochChanges([$0])) }
        }
        out.append(.sendToLinks(headMessage))
        return out + applyRemovals(now: now)
    }

    /// Evicts every known member whose node key is now removed, with a `removed` event.
    mutating func applyRemovals(now: Double) -> [SessionEffect] {
        var out: [SessionEffect] = []
        for info in swim.members.values.sorted(by: { $0.id < $1.id })
        where info.id != local && !removedMembers.contains(info.id) && epochs.removedNodes[info.node] != nil {
            out += evict(info, report: true, now: now)
        }
        // Links up to peers not in the member table yet (a joiner) whose node key is removed.
        for (peer, link) in epochLinks.sorted(by: { $0.key < $1.key }) where swim.members[peer] == nil && epochs.removedNodes[link.node] != nil {
            out.append(.closeLink(peer))
        }
        return out + syncCutoffs(now: now)
    }

    /// Hands broadcast the cut-off of every removed origin this member knows: the highest a change
    /// gives for its member id and its pinned node key (a cut-off naming another node key than the
    /// one the id is pinned to counts for nothing), raised as more changes arrive.
    mutating func syncCutoffs(now: Double) -> [SessionEffect] {
        var out: [SessionEffect] = []
        for (key, seq) in epochs.cutoffs.sorted(by: { $0.key.origin < $1.key.origin })
        where key.origin != local && swim.members[key.origin]?.node == key.node && seq > broadcast.cutoffs[key.origin] ?? 0 {
            out += broadcastEffects(broadcast.setCutoff(key.origin, through: seq), now: now)
        }
        return out
    }

    /// Takes a member whose node key is removed out of the session (see the note above).
    mutating func evict(_ info: MemberInfo, report: Bool, now: Double) -> [SessionEffect] {
        guard info.id != local, removedMembers.insert(info.id).inserted else { return [] }
        // Its broadcasts after its cut-off never count; with none known, after what is delivered here.
        let cutoff = epochs.cutoff(of: info.id, node: info.node) ?? broadcast.delivered[info.id] ?? 0
        var out = broadcastEffects(broadcast.setCutoff(info.id, through: cutoff), now: now)
        let live = self.live
        out += broadcastEffects(broadcast.setMembers(live, now: now), now: now)
        broadcast.memberLeft(info.id, now: now)
        journal.setPeers(live, now: now)
        out.append(forgetMember(info.id))
        out += forgetParticipants(of: info.id)
        if report {
            out.append(.memberRemoved(info, by: memberID(of: epochs.removedNodes[info.node] ?? [])))
        }
        return out
    }

    /// This member's own node key was removed: it closes every link and stops.
    mutating func removedHere(by: [UInt8], now: Double) -> [SessionEffect] {
        let remover = memberID(of: by)
        var out: [SessionEffect] = [.epochRemoved(by: by, member: remover)]
        if let me = swim.members[local] { out.append(.memberRemoved(me, by: remover)) }
        for peer in planner.linked.sorted() { out.append(.closeLink(peer)) }
        rekeyAt = .infinity
        return out
    }

    /// The member id a node key runs as here: a live one first, then the lowest.
    func memberID(of node: [UInt8]) -> MemberID? {
        if node == epochs.nodeKey { return local }
        let runs = swim.members.values.filter { $0.node == node }
        return (runs.filter { $0.state == .alive || $0.state == .suspect }.min { $0.id < $1.id } ?? runs.min { $0.id < $1.id })?.id
    }
}
