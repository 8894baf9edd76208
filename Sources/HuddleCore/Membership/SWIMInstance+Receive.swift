extension SWIMInstance {
    /// Handles one datagram from `from` (the `host:port` it came from; replies go there).
    /// Piggybacked updates are applied first, so an ack already carries a refutation they caused.
    public mutating func receive(_ message: SWIMMessage, from: String, now: Double) -> [SWIMEffect] {
        start(now)
        guard local.state != .left else { return [] }
        var effects: [SWIMEffect] = []
        let incarnation = local.incarnation
        for update in message.gossip { apply(update, now: now, into: &effects) }
        // Unless we refuted just now (the refutation is queued, and an ack below carries it).
        if local.incarnation == incarnation { correctStaleClaims(in: message, from: from, into: &effects) }
        switch message.kind {
        case let .ping(seq, target):
            // A ping for another member id (an earlier run of the node at this address) stays unanswered.
            if target == local.id { effects.append(self.message(.ack(seq: seq), to: from)) }
        case let .ack(seq):
            if let p = probe, p.seq == seq {
                probe = nil
                awareness.apply(-1)
                probeCounts.acked += 1
                probeCounts.lastRoundTrip = max(0, now - p.sentAt)
            } else if let relay = relays.removeValue(forKey: seq) {
                effects.append(self.message(.ack(seq: relay.seq), to: relay.requester))
            }
        case let .pingReq(seq, target, targetAddr):
            guard target != local.id else { break }
            guard HostPort.isNumeric(targetAddr) else {
                refuse(.hostnameAddress, into: &effects)
                break
            }
            // Only a member this node knows, at the address of its own signed record: a ping-req
            // never makes this node send to an address of the requester's choosing (reflection).
            // One it does not know (yet: gossip lags behind the prober) stays unanswered, as a
            // ping for another member id does; the prober's other helpers answer.
            guard let known = members[target], known.state != .left else { break }
            guard relays.count < Self.maximumRelays else {
                refuse(.pingReqOverflow, into: &effects)
                break
            }
            self.seq &+= 1
            relays[self.seq] = Relay(requester: from, target: target, seq: seq, nackAt: now + settings.probeTimeout * settings.nackFraction)
            effects.append(self.message(.ping(seq: self.seq, target: target), to: known.addr))
        case let .nack(seq):
            if var p = probe, p.seq == seq {
                p.nacks += 1
                probe = p
            }
        case .gossip:
            break
        }
        return effects
    }

    /// Answers suspect/failed claims older than what we know (the member refuted since, or left)
    /// with the newer records, straight to the sender. Dissemination is probabilistic: now and then a
    /// member misses a refutation, and without this it would declare a live member failed when its
    /// suspicion timer ran out. The claim it keeps gossiping reaches members that know better, and
    /// they tell it at once (targeted anti-entropy; memberlist waits for the next push-pull instead).
    private mutating func correctStaleClaims(in message: SWIMMessage, from: String, into effects: inout [SWIMEffect]) {
        var corrections: [SWIMGossip] = []
        var size = SWIMMessage(sender: local.id, kind: .gossip).headerSize
        for update in message.gossip {
            switch update {
            case .suspect, .failed:
                guard let known = members[update.member] else { continue }
                let correction: SWIMGossip
                if known.state == .alive, known.incarnation > update.incarnation {
                    correction = .alive(known)
                } else if known.state == .left {
                    correction = .left(known.id, incarnation: known.incarnation, signature: known.proof)
                } else {
                    continue
                }
                guard size + correction.encodedSize <= settings.maxMessageBytes else { continue }
                size += correction.encodedSize
                corrections.append(correction)
            case .alive, .left:
                continue
            }
        }
        if !corrections.isEmpty {
            effects.append(.send(SWIMMessage(sender: local.id, kind: .gossip, gossip: corrections), to: from))
        }
    }

    /// Merges a peer's full state from a push-pull exchange (both sides call this: the contacted
    /// member with the initiator's state, the initiator with the answer).
    ///
    /// Unknown alive or suspect members are learned (`joined`) from their own signed records; signed
    /// claims about self at our incarnation are refuted (that is how the halves of a healed partition
    /// find out). Unlike
    /// memberlist's `mergeState`, a `suspect`/`failed` claim about a member we hold alive at the same
    /// incarnation is ignored: it is what the other half of a partition believed, and our own probes
    /// judge that member; believing it would suspect every member at once when halves re-merge.
    /// Instead the member itself is told (the signed claim, sent to it alone): it refutes with
    /// a higher incarnation, which the other half takes. Without that, a member failed by the other
    /// half only learned it when a re-merge push-pull happened to pick it (10–20 s apart per
    /// member): 40 s after a 100-member partition healed, 19 members were still failed on the
    /// far side. A record at a higher incarnation is taken (the member signed it), and its claim
    /// left to our own probes: never an instant failure. A claim is passed on to its member only
    /// when its claimer is live here (nothing from a failed or left member counts); the member
    /// checks the signature itself.
    public mutating func receivePushPull(_ state: [MemberInfo], join: Bool, from: String, now: Double) -> [SWIMEffect] {
        start(now)
        guard local.state != .left else { return [] }
        seeds = []
        var effects: [SWIMEffect] = []
        var told = 0
        for info in state {
            let failed = info.state == .failed
            if info.id == local.id {
                if let claim = info.claim, info.state == .suspect || failed {
                    applyClaim(failed: failed, about: local.id, incarnation: info.incarnation, from: claim.from,
                               signature: claim.signature, checked: false, now: now, into: &effects)
                }
                continue
            }
            switch info.state {
            case .alive:
                applyAlive(info, now: now, into: &effects)
            case .suspect, .failed:
                if let known = members[info.id] {
                    if info.incarnation > known.incarnation {
                        // The member's own newer record; the claim on it is left to our own probes.
                        applyAlive(info, now: now, into: &effects)
                    } else if info.incarnation == known.incarnation, known.state == .alive, let claim = info.claim,
                              members[claim.from].map({ Self.isLive($0.state) }) ?? false,
                              told < Self.claimsToldPerPushPull,
                              now - (claimToldAt[info.id] ?? -.infinity) >= Self.claimRetell {
                        // Once per member per `claimRetell`: repeated push-pulls (a hostile member
                        // can send them as fast as its link carries them) are not multiplied.
                        if claimToldAt.count >= members.count { claimToldAt = claimToldAt.filter { now - $0.value < Self.claimRetell } }
                        claimToldAt[info.id] = now
                        told += 1
                        // The claimer's own signed claim: the member checks it and refutes.
                        let gossip: SWIMGossip = failed
                            ? .failed(info.id, incarnation: info.incarnation, from: claim.from, signature: claim.signature)
                            : .suspect(info.id, incarnation: info.incarnation, from: claim.from, signature: claim.signature)
                        effects.append(.send(SWIMMessage(sender: local.id, kind: .gossip, gossip: [gossip]), to: known.addr))
                    }
                } else if info.state == .suspect {
                    applyAlive(info, now: now, into: &effects)
                }
            case .left:
                applyLeft(info.id, incarnation: info.incarnation, signature: info.proof, now: now, into: &effects)
            }
        }
        return effects
    }

    /// Most members told of a claim about them by one push-pull (a healed partition's far half).
    static let claimsToldPerPushPull = 256
    /// How soon one member may be told of such a claim again.
    static let claimRetell = 2.0
}
