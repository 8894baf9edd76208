import HuddleCrypto

/// Who may come back with an old key, and what they are handed: the "nobody stranded" rules.
extension EpochHistory {
    /// The keys a link handshake tries, the current one first, then older ones newest first: every
    /// key this member holds of an epoch that ended within the grace, at most
    /// `EpochSettings.maxHandshakeKeys`. A responder tries each as the PSK of the first message; a
    /// dialer whose handshake with the current key fails tries the older ones (the peer may not have
    /// heard of the current epoch yet). `SessionKey.head` names which epoch a key is.
    public func handshakeKeys(now: Double) -> [SessionKey] {
        let older = keys.filter { hash, _ in hash != head && endedAt[hash].map { now - $0 <= settings.grace } ?? false }
            .map(\.value)
            .sorted { $0.epoch != $1.epoch ? $0.epoch > $1.epoch : bytesPrecede($0.head, $1.head) }
        return Array(((current.map { [$0] } ?? []) + older).prefix(settings.maxHandshakeKeys))
    }

    /// Whether a member whose handshake proved it holds the key of the epoch `keyHead`, with node
    /// key `node`, is let in: never a removed node key (with any key); `current` with the current
    /// key; `behind` with the key of an epoch within the grace when `node` was on that epoch's
    /// roster or on the roster of a change made on top of it (its maker counted `node` a member
    /// then; a roster counts only while its maker is not removed, `rosterCounts`), or this member let it in with that key while that epoch was the head (`vouch`: a
    /// joiner that a concurrent change left out); refused otherwise.
    public func admission(of node: [UInt8], holding keyHead: [UInt8], now: Double) -> EpochAdmission {
        if removedNodes[node] != nil { return .refused(.removedNode) }
        if keyHead == head { return .current }
        guard let entry = entries[keyHead], keys[keyHead] != nil, let ended = endedAt[keyHead], now - ended <= settings.grace else {
            return .refused(.epochOutsideGrace)
        }
        if entry.roster?.contains(node) == true && rosterCounts(entry) { return .behind }
        if entry.children.contains(where: { entries[$0].map { $0.roster?.contains(node) == true && rosterCounts($0) } ?? false }) { return .behind }
        if vouched[keyHead]?.contains(node) == true { return .behind }
        return .refused(.notOnRoster)
    }

    /// Whether an epoch's roster lets a node key in: not when its maker is removed or proven to
    /// equivocate. Keys a hostile member put on the roster of a change of its own (a losing sibling
    /// included) lose that way in when it is removed, and are never granted a key made after; an
    /// honest member that was on that roster is on the roster of the change that removed its maker.
    func rosterCounts(_ entry: Entry) -> Bool {
        guard let maker = entry.makerNode else { return true }
        return removedNodes[maker] == nil && !equivocators.contains(maker)
    }

    /// What to hand a member let in as `behind`: the winning changes after the epoch it holds (from
    /// where its branch meets the winning one), parent first, and a grant of the current key sealed
    /// to `node` when the current roster does not include it. Nil when it is not let in.
    public func handover(to node: [UInt8], holding keyHead: [UInt8], now: Double, using rng: inout some RandomNumberGenerator) -> EpochHandover? {
        switch admission(of: node, holding: keyHead, now: now) {
        case .refused: return nil
        case .current: return EpochHandover(changes: [], grant: nil)
        case .behind: break
        }
        var meet: [UInt8]? = keyHead
        while let h = meet, !chain.contains(h) { meet = entries[h]?.parent }
        let changes = changes(after: meet ?? root)
        guard let key = current, !(entries[head]?.roster?.contains(node) ?? false) else { return EpochHandover(changes: changes, grant: nil) }
        let sealed = try? SealedBox.seal(key.bytes + bigEndian(key.epoch), to: node, ephemeralSeed: randomBytes(32, &rng))
        return EpochHandover(changes: changes, grant: sealed.map {
            EpochGrant(session: sessionID, epoch: key.epoch, head: head, recipient: node, sealedKey: $0)
        })
    }

    /// Receives a grant of the current key: accepted only for this member's node key, for the
    /// current head (the changes of the handover come first), when the key it opens matches that
    /// change's key check.
    public mutating func receive(_ grant: EpochGrant, now: Double) -> EpochReceipt {
        guard grant.session == sessionID else { return .refused(.epochOtherSession) }
        if isRemoved { return .refused(.removedNode) }
        guard grant.recipient == nodeKey, grant.head == head, let change = entries[head]?.change, grant.epoch == change.epoch else {
            return .refused(.epochBadGrant)
        }
        if current != nil { return .duplicate }
        guard let key = EpochChange.openSealed(grant.sealedKey, identity: identity, epoch: change.epoch, session: sessionID,
                                               head: head, keyCheck: change.keyCheck) else { return .refused(.epochBadGrant) }
        keys[head] = key
        unopenable.remove(head)
        settle(now: now)
        return .moved(key)
    }

    /// Receives a handover: its changes, then its grant.
    public mutating func receive(_ handover: EpochHandover, now: Double) -> EpochReceipt {
        let before = (head: head, removed: isRemoved, key: current)
        var last: EpochReceipt = .recorded
        for change in handover.changes {
            let receipt = receive(change, now: now)
            if case .refused = receipt { return receipt }
            last = receipt
        }
        if let grant = handover.grant, current == nil, !isRemoved { return receive(grant, now: now) }
        if case .removed = last { return last }
        return receipt(before: before)
    }
}
