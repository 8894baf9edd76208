extension SWIMInstance {
    /// Applies one disseminated update with SWIM's precedence rules (SWIM §4.2, memberlist `state.go`):
    /// alive overrides suspect and failed only at a higher incarnation; suspect overrides alive at the
    /// same or a higher incarnation; failed overrides alive and suspect at the same or a higher one;
    /// left is final. Every accepted change is gossiped on.
    mutating func apply(_ update: SWIMGossip, now: Double, into actions: inout [SWIMAction]) {
        switch update {
        case let .alive(info): applyAlive(info, now: now, into: &actions)
        case let .suspect(id, inc, from): applySuspect(id, incarnation: inc, from: from, now: now, into: &actions)
        case let .failed(id, inc, from): applyFailed(id, incarnation: inc, from: from, now: now, into: &actions)
        case let .left(id, inc): applyLeft(id, incarnation: inc, now: now, into: &actions)
        }
    }

    mutating func applyAlive(_ info: MemberInfo, now: Double, into actions: inout [SWIMAction]) {
        guard info.id != local.id else { return }  // only we speak for ourselves
        var record = info
        record.state = .alive
        guard let old = members[info.id] else {
            guard makeRoomForMember() else {
                refuse(.memberTableFull, into: &actions)
                return
            }
            members[info.id] = record
            liveCount += 1
            addToProbeOrder(info.id)
            broadcasts.enqueue(.alive(record))
            actions.append(.emit(.joined, record))
            return
        }
        guard old.state != .left, info.incarnation > old.incarnation else { return }
        // The node key is pinned at first sight: a member id never changes hands.
        guard old.node == info.node else {
            refuse(.keyChange, into: &actions)
            return
        }
        members[info.id] = record
        suspicions[info.id] = nil
        if old.state == .failed {
            downSince[info.id] = nil
            liveCount += 1
        }
        broadcasts.enqueue(.alive(record))
        let metadataChanged = old.name != record.name || old.addr != record.addr
        switch old.state {
        case .suspect, .failed: actions.append(.emit(.alive, record))
        case .alive: if metadataChanged { actions.append(.emit(.updated, record)) }
        case .left: break
        }
    }

    mutating func applySuspect(_ id: MemberID, incarnation: UInt64, from: MemberID, now: Double, into actions: inout [SWIMAction]) {
        if id == local.id {
            if incarnation >= local.incarnation { refute(incarnation) }
            return
        }
        guard var m = members[id], incarnation >= m.incarnation else { return }
        switch m.state {
        case .suspect:
            // Lifeguard §IV.B: an independent suspecter shortens the timeout; pass it on once.
            if var s = suspicions[id], s.confirm(from) {
                suspicions[id] = s
                broadcasts.enqueue(.suspect(id, incarnation: m.incarnation, from: from))
            }
        case .alive:
            m.state = .suspect
            m.incarnation = incarnation
            members[id] = m
            let bounds = suspicionBounds
            // With too few members to confirm, wait the minimum (memberlist `suspectNode`).
            let k = liveCount - 2 < settings.suspicionConfirmations ? 0 : settings.suspicionConfirmations
            suspicions[id] = SWIMSuspicion(from: from, k: k, min: bounds.min, max: bounds.max, now: now)
            broadcasts.enqueue(.suspect(id, incarnation: incarnation, from: from))
            actions.append(.emit(.suspect, m))
        case .failed, .left:
            break
        }
    }

    mutating func applyFailed(_ id: MemberID, incarnation: UInt64, from: MemberID, now: Double, into actions: inout [SWIMAction]) {
        if id == local.id {
            if incarnation >= local.incarnation { refute(incarnation) }
            return
        }
        guard var m = members[id], Self.isLive(m.state), incarnation >= m.incarnation else { return }
        m.state = .failed
        m.incarnation = incarnation
        members[id] = m
        suspicions[id] = nil
        downSince[id] = now
        liveCount -= 1
        broadcasts.enqueue(.failed(id, incarnation: incarnation, from: from))
        actions.append(.emit(.failed, m))
    }

    mutating func applyLeft(_ id: MemberID, incarnation: UInt64, now: Double, into actions: inout [SWIMAction]) {
        if id == local.id {
            if incarnation >= local.incarnation { refute(incarnation) }
            return
        }
        guard var m = members[id], m.state != .left, incarnation >= m.incarnation else { return }
        if Self.isLive(m.state) { liveCount -= 1 }
        m.state = .left
        m.incarnation = incarnation
        members[id] = m
        suspicions[id] = nil
        downSince[id] = now
        broadcasts.enqueue(.left(id, incarnation: incarnation))
        actions.append(.emit(.left, m))
    }

    /// Counts a refused record; the first of its reason is reported (`SWIMAction.refused`).
    mutating func refuse(_ reason: Refusal, into actions: inout [SWIMAction]) {
        if refusals.add(reason) { actions.append(.refused(reason)) }
    }

    /// Someone believes we are suspect, failed or gone at `incarnation`: outbid it and say so
    /// (SWIM §4.2). Being suspected hints that we are the slow one, so local health worsens
    /// (Lifeguard §IV.A, memberlist `refute`).
    mutating func refute(_ incarnation: UInt64) {
        guard local.state != .left else { return }
        local.incarnation = max(local.incarnation, incarnation) + 1
        members[local.id] = local
        broadcasts.enqueue(.alive(local))
        awareness.apply(1)
    }
}
