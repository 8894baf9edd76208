#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension SWIMInstance {
    /// Drives everything timed: probe timeouts and indirect probes, nacks for relayed probes,
    /// suspicion expiry, the next probe, gossip rounds, push-pull, re-merge, join retries and reaping.
    public mutating func tick(now: Double) -> [SWIMEffect] {
        start(now)
        var effects: [SWIMEffect] = []
        if local.state == .left {
            gossipRound(now: now, into: &effects)
            return effects
        }
        probeTimers(now: now, into: &effects)
        relayTimers(now: now, into: &effects)
        suspicionTimers(now: now, into: &effects)
        if now >= nextProbeAt {
            nextProbeAt = now + awareness.scale(settings.probeInterval)
            startProbe(now: now, into: &effects)
        }
        gossipRound(now: now, into: &effects)
        periodicWork(now: now, into: &effects)
        return effects
    }

    // MARK: Probing (SWIM §3, Lifeguard §IV.A)

    private mutating func probeTimers(now: Double, into effects: inout [SWIMEffect]) {
        guard var p = probe else { return }
        if now > p.deadline + settings.probeInterval {
            // This member was not running when the answer was due (paused, starved of CPU): the
            // probe says nothing about the target, only that we are slow (Lifeguard §IV.A).
            probe = nil
            probeCounts.failed += 1
            awareness.apply(1)
        } else if now >= p.deadline {
            probe = nil
            probeCounts.failed += 1
            probeFailed(p, now: now, into: &effects)
        } else if !p.indirectSent, now >= p.timeoutAt {
            p.indirectSent = true
            if let target = members[p.target] {
                for helper in randomMembers(settings.indirectChecks, excluding: p.target, recentlyFailed: false, now: now) {
                    effects.append(message(.pingReq(seq: p.seq, target: p.target, targetAddr: target.addr), to: helper.addr))
                    p.expectedNacks += 1
                }
            }
            probe = p
        }
    }

    /// No ack by the end of the period: adjust local health by the missed nacks (or by one when no
    /// helper could be asked), as memberlist's `probeNode` does, then suspect the target.
    private mutating func probeFailed(_ p: Probe, now: Double, into effects: inout [SWIMEffect]) {
        awareness.apply(p.expectedNacks > 0 ? max(0, p.expectedNacks - p.nacks) : 1)
        guard let target = members[p.target], Self.isLive(target.state) else { return }
        applyOwnClaim(failed: false, about: p.target, now: now, into: &effects)
    }

    private mutating func startProbe(now: Double, into effects: inout [SWIMEffect]) {
        guard let target = nextProbeTarget() else { return }
        seq &+= 1
        probe = Probe(target: target.id, seq: seq,
                      timeoutAt: now + awareness.scale(settings.probeTimeout),
                      deadline: now + awareness.scale(settings.probeInterval), sentAt: now)
        probeCounts.sent += 1
        // Buddy system (Lifeguard §IV.C): a suspect hears its suspicion with the probe and refutes at once.
        let buddy: [SWIMGossip]
        if target.state == .suspect, let claim = target.claim {
            buddy = [.suspect(target.id, incarnation: target.incarnation, from: claim.from, signature: claim.signature)]
        } else {
            buddy = target.state == .suspect ? [ownClaim(failed: false, about: target.id, incarnation: target.incarnation)] : []
        }
        effects.append(message(.ping(seq: seq, target: target.id), to: target.addr, prefix: buddy))
    }

    /// The next live member to probe: one revived on a record first (`probeNext`), else the next in
    /// the randomized round-robin order; the order is reshuffled after each full round (SWIM §4.3),
    /// so every live member is probed once per round.
    private mutating func nextProbeTarget() -> MemberInfo? {
        while !probeNext.isEmpty {
            if let m = members[probeNext.removeFirst()], Self.isLive(m.state) { return m }
        }
        var looked = 0
        while looked <= probeOrder.count {
            if probeIndex >= probeOrder.count {
                probeOrder.shuffle(using: &rng)
                probeIndex = 0
                if probeOrder.isEmpty { return nil }
            }
            let id = probeOrder[probeIndex]
            probeIndex += 1
            looked += 1
            if let m = members[id], Self.isLive(m.state) { return m }
        }
        return nil
    }

    /// A helper that heard nothing from the target tells the requester so (nack).
    private mutating func relayTimers(now: Double, into effects: inout [SWIMEffect]) {
        guard !relays.isEmpty else { return }
        for key in relays.keys.sorted() {
            guard let relay = relays[key], relay.nackAt <= now else { continue }
            relays[key] = nil
            effects.append(message(.nack(seq: relay.seq), to: relay.requester))
        }
    }

    private mutating func suspicionTimers(now: Double, into effects: inout [SWIMEffect]) {
        guard !suspicions.isEmpty else { return }
        for id in suspicions.keys.sorted() {
            guard var s = suspicions[id], s.deadline <= now else { continue }
            guard members[id] != nil else { suspicions[id] = nil; continue }
            // Direct evidence beats hearsay: a suspicion only others started, of a member this
            // member heard from itself over its link since, does not fail it here; it waits
            // another timeout for the member's refutation (a hostile claimer's claims, each
            // refuted, used to fail the member wherever one refutation was lost).
            if !s.suspecters.contains(local.id), let heard = heardFrom[id], heard > s.start {
                s.rearm(now: now)
                suspicions[id] = s
                continue
            }
            applyOwnClaim(failed: true, about: id, now: now, into: &effects)
        }
    }

    // MARK: Dissemination (SWIM §4.1)

    /// Every `gossipInterval`, pending updates go to `gossipFanout` random members, recently failed
    /// ones included so a falsely failed member learns it and refutes.
    mutating func gossipRound(now: Double, into effects: inout [SWIMEffect]) {
        guard now >= nextGossipAt else { return }
        nextGossipAt = now + settings.gossipInterval
        guard !broadcasts.isEmpty else { return }
        for target in randomMembers(settings.gossipFanout, excluding: nil, recentlyFailed: true, now: now) {
            let gossip = broadcasts.take(budget: settings.maxMessageBytes - 11, limit: retransmitLimit)
            if gossip.isEmpty { break }
            effects.append(.send(SWIMMessage(sender: local.id, kind: .gossip, gossip: gossip), to: target.addr))
        }
    }

    // MARK: Push-pull, re-merge, join retries, reaping

    /// memberlist `pushPullScale`: the interval grows by one step per doubling beyond 32 members.
    public var pushPullIntervalScaled: Double {
        let n = Double(liveCount)
        guard n > 32 else { return settings.pushPullInterval }
        return settings.pushPullInterval * (ceil(log2(n) - log2(32)) + 1)
    }

    private mutating func periodicWork(now: Double, into effects: inout [SWIMEffect]) {
        if now >= nextPushPullAt {
            nextPushPullAt = now + pushPullIntervalScaled
            if let peer = randomMembers(1, excluding: nil, recentlyFailed: false, now: now).first {
                effects.append(.pushPull(to: peer.addr, member: peer.id, join: false))
            }
        }
        if now >= nextRemergeAt {
            nextRemergeAt = now + rng.uniform(settings.remergeIntervalMin, settings.remergeIntervalMax)
            let candidates = downSince.filter { id, since in
                members[id]?.state == .failed && now - since <= settings.remergeWindow
            }.keys.sorted()
            if !candidates.isEmpty, let m = members[candidates[rng.index(candidates.count)]] {
                effects.append(.pushPull(to: m.addr, member: m.id, join: false))
            }
        }
        if !seeds.isEmpty, now >= nextJoinRetryAt {
            joinBackoff = min(joinBackoff * 2, 30)
            nextJoinRetryAt = now + joinBackoff
            for seed in seeds { effects.append(.pushPull(to: seed, member: nil, join: true)) }
        }
        if now >= nextReapAt {
            nextReapAt = now + 60
            reap(now: now)
        }
    }

    /// Forgets failed and left members after `reapFailedAfter` / `reapLeftAfter`.
    private mutating func reap(now: Double) {
        var gone: Set<MemberID> = []
        for (id, since) in downSince {
            let limit = members[id]?.state == .left ? settings.reapLeftAfter : settings.reapFailedAfter
            if now - since > limit { gone.insert(id) }
        }
        forget(gone)
    }

    /// Drops members from the table (reaped, or making room for a new one).
    mutating func forget(_ gone: Set<MemberID>) {
        guard !gone.isEmpty else { return }
        for id in gone { downSince[id] = nil; members[id] = nil; suspicions[id] = nil; claimToldAt[id] = nil; heardFrom[id] = nil; claimLimits.forget(id) }
        probeOrder.removeAll { gone.contains($0) }
        probeIndex = min(probeIndex, probeOrder.count)
    }

    /// Whether the table has room for one more member (`SWIMSettings.memberLimit`): when it is
    /// full, the member down (failed or left) the longest is forgotten to make it; false when
    /// every member in it is live.
    mutating func makeRoomForMember() -> Bool {
        guard members.count >= settings.memberLimit else { return true }
        guard let oldest = downSince.min(by: { ($0.value, $0.key) < ($1.value, $1.key) })?.key else { return false }
        forget([oldest])
        return true
    }
}

extension SWIMInstance {
    /// The shell's reliable link to `member` ended without a `left` first (its process exited and
    /// its kernel closed the connection): evidence as strong as a failed probe, but arriving at
    /// once instead of after a probe period. The member is suspected exactly as if our probe had
    /// failed, so every member linked to it suspects it within milliseconds, the confirmations
    /// bring the timeout to its minimum, and a crashed process is failed one suspicion minimum
    /// after it died. A live member refutes as usual. A paused or partitioned member keeps its
    /// connections open, so this never shortens the pause a member survives.
    public mutating func linkLost(_ member: MemberID, now: Double) -> [SWIMEffect] {
        start(now)
        guard local.state != .left, member != local.id, let m = members[member], m.state == .alive else { return [] }
        var effects: [SWIMEffect] = []
        _ = m
        applyOwnClaim(failed: false, about: member, now: now, into: &effects)
        return effects
    }
}
