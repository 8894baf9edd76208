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
    /// then; a removed maker's roster counts only for the keys it carried, `rosterLetsIn`), or this
    /// member let it in with that key while that epoch was the head (`vouch`: a joiner that a
    /// concurrent rotation left out; not across a removal); refused otherwise.
    public func admission(of node: [UInt8], holding keyHead: [UInt8], now: Double) -> EpochAdmission {
        if removedNodes[node] != nil { return .refused(.removedNode) }
        if keyHead == head { return .current }
        guard let entry = entries[keyHead], keys[keyHead] != nil, let ended = endedAt[keyHead], now - ended <= settings.grace else {
            return .refused(.epochOutsideGrace)
        }
        if rosterLetsIn(node, keyHead) || entry.children.contains(where: { rosterLetsIn(node, $0) }) { return .behind }
        if vouched[keyHead]?.contains(node) == true && !removalOnChain(after: keyHead) { return .behind }
        return .refused(.notOnRoster)
    }

    /// Whether the roster of epoch `hash` lets `node` in: it names `node`, and its maker is neither
    /// removed nor proven to equivocate — or, when it is, `node` was on the parent's roster already
    /// (the removed maker carried it, did not put it there), and so on up. Keys a hostile member put
    /// on the roster of a change of its own lose that way in when it is removed, and are never
    /// granted a key made after; members it carried from the epoch before keep theirs.
    func rosterLetsIn(_ node: [UInt8], _ hash: [UInt8]) -> Bool {
        var cursor: [UInt8]? = hash
        while let h = cursor, let entry = entries[h], entry.roster?.contains(node) == true {
            guard let maker = entry.makerNodeKey, removedNodes[maker] != nil || equivocators.contains(maker) else { return true }
            cursor = entry.parent
        }
        return false
    }

    /// Whether a change on the winning branch after `hash` removed anyone (nil `hash` off the branch:
    /// true). A vouch stands only across rotations: a removal's roster is what its maker decided.
    func removalOnChain(after hash: [UInt8]) -> Bool {
        guard let i = chain.firstIndex(of: hash) else { return true }
        return chain[(i + 1)...].contains { !(entries[$0]?.removed.isEmpty ?? true) }
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
                                               head: head, keyCheck: change.keyCheck, admins: change.admins) else { return .refused(.epochBadGrant) }
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
