extension SWIMInstance {
    /// Applies one disseminated update with SWIM's precedence rules (SWIM §4.2, memberlist `state.go`):
    /// alive overrides suspect and failed only at a higher incarnation; suspect overrides alive at the
    /// same incarnation; failed overrides alive and suspect at the same one; left is final. Every
    /// accepted change is gossiped on, with the signature it came with.
    ///
    /// Nothing is believed unsigned: an `alive` or `left` needs the member's own signature under its
    /// pinned node key, a `suspect` or `failed` the signature of a known claimer over the
    /// incarnation the member itself signed. A claim at a higher incarnation than the record held
    /// here is ignored (the record that would justify it has not arrived yet), never adopted.
    mutating func apply(_ update: SWIMGossip, now: Double, into effects: inout [SWIMEffect]) {
        switch update {
        case let .alive(info): applyAlive(info, now: now, into: &effects)
        case let .suspect(id, inc, from, signature):
            applyClaim(failed: false, about: id, incarnation: inc, from: from, signature: signature, checked: false, now: now, into: &effects)
        case let .failed(id, inc, from, signature):
            applyClaim(failed: true, about: id, incarnation: inc, from: from, signature: signature, checked: false, now: now, into: &effects)
        case let .left(id, inc, signature): applyLeft(id, incarnation: inc, signature: signature, now: now, into: &effects)
        }
    }

    mutating func applyAlive(_ info: MemberInfo, now: Double, into effects: inout [SWIMEffect]) {
        guard info.id != local.id else { return }  // only we speak for ourselves
        // An address is dialled and sent to: a hostname would make this member ask DNS for a peer.
        guard HostPort.isNumeric(info.addr) else {
            refuse(.hostnameAddress, into: &effects)
            return
        }
        var record = info
        record.state = .alive
        record.claim = nil
        guard let old = members[info.id] else {
            // First sight pins the node key: the record must be signed by the key it names.
            guard signer.verify(record.proof, of: MembershipStatement.alive(record), by: record.node) else {
                refuse(.unsignedRecord, into: &effects)
                return
            }
            guard makeRoomForMember() else {
                refuse(.memberTableFull, into: &effects)
                return
            }
            members[info.id] = record
            liveCount += 1
            addToProbeOrder(info.id)
            broadcasts.enqueue(.alive(record))
            effects.append(.emit(.joined, record))
            return
        }
        guard old.state != .left, info.incarnation > old.incarnation else { return }
        // The node key is pinned at first sight: a member id never changes hands.
        guard old.node == info.node else {
            refuse(.keyChange, into: &effects)
            return
        }
        guard signer.verify(record.proof, of: MembershipStatement.alive(record), by: old.node) else {
            refuse(.unsignedRecord, into: &effects)
            return
        }
        members[info.id] = record
        suspicions[info.id] = nil
        if old.state == .failed {
            downSince[info.id] = nil
            liveCount += 1
            // Back from failed on a record, not on an answer: probe it soon, by this member's own check.
            probeSoon(info.id)
        }
        broadcasts.enqueue(.alive(record))
        let metadataChanged = old.name != record.name || old.addr != record.addr || old.reach != record.reach
        switch old.state {
        case .suspect, .failed: effects.append(.emit(.alive, record))
        case .alive: if metadataChanged { effects.append(.emit(.updated, record)) }
        case .left: break
        }
    }

    /// `id` spoke to this member itself, over its authenticated link, at `now` (see `heardFrom`).
    public mutating func heard(from id: MemberID, now: Double) {
        // `index(forKey:)`, not `members[id] != nil`: that copied the member's record per message.
        guard members.index(forKey: id) != nil else { return }
        heardFrom[id] = now
    }

    /// This member's own claim that `id` is suspect (or failed) at the incarnation held here.
    mutating func applyOwnClaim(failed: Bool, about id: MemberID, now: Double, into effects: inout [SWIMEffect]) {
        guard let m = members[id] else { return }
        let signature = signer.sign(MembershipStatement.claim(failed: failed, about: id, incarnation: m.incarnation, by: local.id))
        applyClaim(failed: failed, about: id, incarnation: m.incarnation, from: local.id, signature: signature, checked: true, now: now, into: &effects)
    }

    /// `from` claims `id` suspect (`failed` false) or failed at `incarnation`; `checked` when the
    /// claim is this member's own (its signature needs no check).
    ///
    /// Authority per member (issue 33, item 3): only this member's own decision — its suspicion
    /// timer running out (`suspicionTimers`) — moves a member to `failed` here. Another member's
    /// claim, `suspect` or `failed` alike, only starts a suspicion the member can refute (then the
    /// claimer is its first suspecter), or confirms a running one as an independent suspecter
    /// (Lifeguard §IV.B); it is gossiped on as it came, so the member hears it and refutes. An
    /// honest member's `failed`, gossiped after its own timeout, therefore still converges: every
    /// member that did not suspect the member yet starts its own timer from it, and fails the
    /// member when that runs out, at most one maximum suspicion timeout later.
    ///
    /// A claim about another member counts only from a live (alive or suspect) claimer
    /// (`Refusal.claimerNotLive`), and one that would start a suspicion only within the claimer's
    /// rate (`SWIMClaimLimits`, `SWIMSettings.claimSuspicionsPerWindow`; `Refusal.claimRate`).
    /// A claim about this member is refuted whenever a known member signed it, whatever that
    /// member's state here: it may be live elsewhere, and a refutation is the safe answer; only a
    /// live claimer's claim within its rate worsens local health.
    mutating func applyClaim(failed: Bool, about id: MemberID, incarnation: UInt64, from: MemberID, signature: [UInt8],
                             checked: Bool, now: Double, into effects: inout [SWIMEffect]) {
        func verifies() -> Bool {
            guard !checked else { return true }
            guard let claimer = members[from] else { return false }
            return signer.verify(signature, of: MembershipStatement.claim(failed: failed, about: id, incarnation: incarnation, by: from), by: claimer.node)
        }
        if id == local.id {
            guard incarnation >= local.incarnation else { return }  // refuted already
            // Only this member raises its incarnation: a claim above it names a record that never was.
            guard incarnation == local.incarnation else { refuse(.claimAboveIncarnation, into: &effects); return }
            guard verifies() else { refuse(.unsignedClaim, into: &effects); return }
            // Refuted whatever its claimer's rate (others may believe it), but only a live
            // claimer's claim within its rate is a hint that this member is the slow one: a hostile
            // member's stream of claims cannot stretch this member's probing eightfold.
            let live = members[from].map { Self.isLive($0.state) } ?? false
            refute(incarnation, slower: live && admitsSuspicion(by: from, of: id, now: now))
            return
        }
        // `checked`: this member's own claim. One in its name from elsewhere is an echo (or a forgery).
        let own = checked
        if !own && from == local.id {
            if !verifies() { refuse(.unsignedClaim, into: &effects) }
            return
        }
        guard var m = members[id], incarnation == m.incarnation, Self.isLive(m.state) else { return }
        if !own, let claimer = members[from], !Self.isLive(claimer.state) {
            refuse(.claimerNotLive, into: &effects)
            return
        }
        let gossip: SWIMGossip = failed ? .failed(id, incarnation: incarnation, from: from, signature: signature)
                                        : .suspect(id, incarnation: incarnation, from: from, signature: signature)
        if failed && own {
            // This member's own suspicion ran out: the only way a member fails here.
            m.state = .failed
            m.claim = MemberClaim(from: from, signature: signature)
            members[id] = m
            suspicions[id] = nil
            downSince[id] = now
            liveCount -= 1
            broadcasts.enqueue(gossip)
            effects.append(.emit(.failed, m))
            return
        }
        switch m.state {
        case .suspect:
            // Lifeguard §IV.B: an independent suspecter shortens the timeout; pass it on once.
            guard var s = suspicions[id], !s.suspecters.contains(from) else { return }
            guard verifies() else { refuse(.unsignedClaim, into: &effects); return }
            if s.confirm(from) {
                suspicions[id] = s
                broadcasts.enqueue(gossip)
            }
        case .alive:
            guard verifies() else { refuse(.unsignedClaim, into: &effects); return }
            let bounds = suspicionBounds
            guard own || admitsSuspicion(by: from, of: id, now: now) else {
                refuse(.claimRate, into: &effects)
                return
            }
            m.state = .suspect
            // The record carries a suspect claim only (push-pull, the buddy probe): a `failed`
            // claim's signature is not one, so the suspicion started by it carries none.
            m.claim = failed ? nil : MemberClaim(from: from, signature: signature)
            members[id] = m
            // With too few members to confirm, wait the minimum (memberlist `suspectNode`).
            let k = liveCount - 2 < settings.suspicionConfirmations ? 0 : settings.suspicionConfirmations
            suspicions[id] = SWIMSuspicion(from: from, k: k, min: bounds.min, max: bounds.max, now: now)
            broadcasts.enqueue(gossip)
            effects.append(.emit(.suspect, m))
        case .failed, .left:
            break
        }
    }

    mutating func applyLeft(_ id: MemberID, incarnation: UInt64, signature: [UInt8], now: Double, into effects: inout [SWIMEffect]) {
        guard id != local.id else { return }  // only we could sign our leave, and we have not left
        guard var m = members[id], m.state != .left, incarnation >= m.incarnation else { return }
        guard signer.verify(signature, of: MembershipStatement.left(id, incarnation: incarnation), by: m.node) else {
            refuse(.unsignedRecord, into: &effects)
            return
        }
        if Self.isLive(m.state) { liveCount -= 1 }
        m.state = .left
        m.incarnation = incarnation
        m.proof = signature
        m.claim = nil
        members[id] = m
        suspicions[id] = nil
        downSince[id] = now
        broadcasts.enqueue(.left(id, incarnation: incarnation, signature: signature))
        effects.append(.emit(.left, m))
    }

    /// Counts a refused record; the first of its reason is reported (`SWIMEffect.refused`).
    mutating func refuse(_ reason: Refusal, into effects: inout [SWIMEffect]) {
        if refusals.add(reason) { effects.append(.refused(reason)) }
    }

    /// Whether `claimer` may start a suspicion of `subject` now (its rate, `SWIMClaimLimits`);
    /// when it may, the start is counted.
    mutating func admitsSuspicion(by claimer: MemberID, of subject: MemberID, now: Double) -> Bool {
        claimLimits.admit(claimer: claimer, subject: subject, now: now, window: settings.claimWindow,
                          perWindow: settings.claimSuspicionsPerWindow, subjectGap: suspicionBounds.max)
    }

    /// Someone believes we are suspect or failed at our incarnation: outbid it and say so
    /// (SWIM §4.2). Being suspected hints that we are the slow one, so local health worsens
    /// (Lifeguard §IV.A, memberlist `refute`) when `slower`.
    mutating func refute(_ incarnation: UInt64, slower: Bool = true) {
        guard local.state != .left else { return }
        local.incarnation = max(local.incarnation, incarnation) + 1
        signLocal()
        broadcasts.enqueue(.alive(local))
        if slower { awareness.apply(1) }
    }
}
