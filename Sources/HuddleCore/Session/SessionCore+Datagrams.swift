import HuddleCrypto

/// Datagrams: which of the two sealed forms goes out to whom, and what each may do on receipt
/// (issue 20, item 3: datagrams authenticate their sender and bind their recipient).
///
/// **Link-keyed form** (`PairDatagramSeal`, keys in `datagramKeys`): every link's handshake yields
/// a key per direction that only its two ends hold. A datagram that opens under a member's key was
/// sealed by that member for this one: it carries the member's full authority — any SWIM message
/// (probes, indirect probes, nacks, piggybacked gossip) and unreliable application messages. Its
/// counter is checked in that key's own replay window (per authenticated sender; a counter more than
/// `ReplayWindow.maximumJump` ahead is refused as `counter_jump`).
///
/// **Session-key form** (`DatagramSeal`): any key holder can seal it under any member id, so it
/// carries only what must work before a link exists, and nothing that could change what this member
/// believes about anyone but the claimed sender itself:
/// - a bare `ping` (no gossip) — answered with an `ack`, sealed in the session form too;
/// - a bare `ack` from member X, only when it answers this member's own probe of X (the seq of its
///   ping to X, directly or as a helper running someone's indirect probe of X);
/// - and only from a member this member holds no link keys with: once a link to X exists (and for
///   `DatagramKeyring.grace` after it closed), X's session-key datagrams are refused.
/// Everything else under the session key — gossip, indirect probes, nacks, piggybacked updates,
/// unreliable messages — is refused (`unauthenticated_datagram`). This member sends the session form
/// only where it holds no key for the recipient, and then only pings and acks, stripped of gossip;
/// an unreliable message to a member without link keys is not sent. So a key holder that is not X
/// can, with datagrams, at most answer this member's probe of X while no link to X exists (a probe
/// the link soon replaces) and spoil X's session-key replay window (one claimed counter far ahead),
/// which costs X only its pre-link probes of this member.
extension SessionCore {
    // MARK: link keys

    /// A link to `peer` was admitted (`admitLink`): its datagram keys are installed — as the keys in
    /// use (`current`), or, for a duplicate link that lost, retired from the start (the other end
    /// may have sealed with them before it switched).
    public mutating func installDatagramKeys(_ keys: PairDatagramKeys, for peer: MemberID, current: Bool, now: Double) {
        guard peer != local else { return }
        datagramKeys.install(keys, for: peer, current: current, now: now)
    }

    // MARK: receiving

    /// A datagram that opened (`DatagramOpener`), from UDP address `source`: judged by its form
    /// (see above), then handled. A SWIM message only as its own sender's; an unreliable message
    /// only from a live member as its own origin, and only when it is for this member.
    public mutating func receiveDatagram(_ datagram: OpenedDatagram, from source: String, now: Double) -> [SessionEffect] {
        if epochs.isRemoved { return [] }
        let congested = broadcast.isCongested
        let out: [SessionEffect]
        switch datagram.form {
        case let .link(serial): out = receiveLinkKeyed(datagram.payload, serial: serial, from: source, now: now)
        case .session: out = receiveSessionKeyed(datagram.payload, from: source, now: now)
        }
        return out + congestionCleared(since: congested)
    }

    private mutating func receiveLinkKeyed(_ payload: DatagramPayload, serial: UInt64, from source: String, now: Double) -> [SessionEffect] {
        // Nil: the key was dropped between opening and now (the member failed or left meanwhile).
        guard let verdict = datagramKeys.check(payload.sender, serial: serial, counter: payload.counter) else { return [] }
        switch verdict {
        case .replayed: return refuse(.replayedDatagram)
        case .jump: return refuse(.counterJump)
        case .fresh: break
        }
        noteSource(source, of: payload.sender)
        noteUDPPath(payload.sender, source: source, now: now)
        reach.sawDatagram(from: payload.sender, source: source)
        switch payload.content {
        case let .swim(message):
            guard message.sender == payload.sender else { return [] }
            return receive(message, from: source, now: now)
        case let .message(m): return receiveUnreliable(m, from: payload.sender)
        }
    }

    /// An unreliable message from `sender` (a link-keyed datagram's, or over its link): delivered
    /// only from a live member as its own origin, when it is for this member, and within the
    /// largest unreliable body any member may send (a datagram cannot be larger; a link message could).
    mutating func receiveUnreliable(_ m: WireMessage, from sender: MemberID) -> [SessionEffect] {
        guard m.origin == sender, m.seq == 0, isLive(m.origin), m.to?.contains(local) ?? true else { return [] }
        guard m.body.count <= Limits.unreliableCeiling else { return refuse(.bodyTooLarge) }
        return [.deliverUnreliable(m)]
    }

    private mutating func receiveSessionKeyed(_ payload: DatagramPayload, from source: String, now: Double) -> [SessionEffect] {
        let sender = payload.sender
        // A removed node key with the key of an epoch it was on (still opened within the grace).
        if removedMembers.contains(sender) { return refuse(.removedNode) }
        guard !datagramKeys.has(sender), case let .swim(message) = payload.content, message.sender == sender,
              message.gossip.isEmpty, sessionFormCarries(message.kind, from: sender) else {
            return refuse(.unauthenticatedDatagram)
        }
        if replayWindows[sender] == nil && replayWindows.count >= Self.replayWindowLimit {
            replayWindows = replayWindows.filter { swim.members[$0.key] != nil }
        }
        switch replayWindows[sender, default: ReplayWindow()].check(payload.counter) {
        case .replayed: return refuse(.replayedDatagram)
        case .jump: return refuse(.counterJump)
        case .fresh: return receive(message, from: source, now: now)
        }
    }

    /// A bare ping, or the ack to this member's own probe of `sender` (direct, or as a helper).
    private func sessionFormCarries(_ kind: SWIMMessage.Kind, from sender: MemberID) -> Bool {
        switch kind {
        case .ping: return true
        case let .ack(seq):
            if let p = swim.probe, p.seq == seq, p.target == sender { return true }
            return swim.relays[seq]?.target == sender
        case .pingReq, .nack, .gossip: return false
        }
    }

    /// Remembers where `member`'s link-keyed datagrams come from, when that is not the address it
    /// advertises (a NAT, a relay): answers sent there are then sealed for it. One address per
    /// member (its latest), and only members holding keys once the table passes 64 entries.
    private mutating func noteSource(_ source: String, of member: MemberID) {
        guard swim.members[member]?.addr != source, datagramSources[source] != member else { return }
        if let earlier = datagramSources.first(where: { $0.value == member })?.key { datagramSources[earlier] = nil }
        if datagramSources.count >= 64 { datagramSources = datagramSources.filter { datagramKeys.has($0.value) } }
        datagramSources[source] = member
    }

    // MARK: sending

    /// The datagram that carries a SWIM message to `addr`: link-keyed when this member holds keys
    /// for the member there; otherwise in the session form, if at all — a ping or an ack, without
    /// its gossip. Nothing to a removed member: SWIM still probes it until it fails, but a removed
    /// member is sent nothing at all (it could not open the new epoch's seal; its address still
    /// sees no traffic from the session).
    mutating func datagram(_ message: SWIMMessage, to addr: String) -> SessionEffect? {
        let recipient: MemberID?
        if case let .ping(_, target) = message.kind { recipient = target } else { recipient = keyedMember(at: addr) }
        if let recipient, removedMembers.contains(recipient) { return nil }
        // A member reached through a relay, or whose link comes from behind a NAT: over that link
        // (its advertised address may take no datagram: SWIM would fail a member it hears from).
        if let recipient, datagramsNeedAPath(recipient) { return .sendLink(recipient, .swim(message)) }
        if let recipient, let sending = datagramKeys.nextSend(to: recipient) {
            let payload = DatagramPayload(sender: local, counter: sending.counter, content: .swim(message))
            return .sendDatagram(payload, to: addr, sealing: .link(recipient, serial: sending.serial))
        }
        switch message.kind {
        case .ping, .ack: break
        case .pingReq, .nack, .gossip: return nil
        }
        sessionDatagrams += 1
        let bare = SWIMMessage(sender: message.sender, kind: message.kind)
        return .sendDatagram(DatagramPayload(sender: local, counter: sessionDatagrams, content: .swim(bare)), to: addr, sealing: .session)
    }

    /// An unreliable message to `member` at `addr`: a link-keyed datagram, or not sent at all (no
    /// member's application message ever travels under the session key) — except to a member whose
    /// datagrams may not arrive at `addr` (its link relayed, or coming from behind a NAT: the same
    /// rule as SWIM's, `datagram(_:to:)`): a datagram to its UDP path while one is fresh
    /// (`SessionCore+UDPPaths`), else over that link, once, as a datagram would.
    mutating func unreliable(_ message: WireMessage, to member: MemberID, addr: String) -> SessionEffect? {
        // A removed member is sent nothing (its link may not have closed yet).
        if removedMembers.contains(member) { return nil }
        var addr = addr
        if datagramsNeedAPath(member) {
            guard let path = udpPaths.address(of: member) else { return .sendLink(member, .unreliable(message)) }
            addr = path
        }
        guard let sending = datagramKeys.nextSend(to: member) else { return nil }
        let payload = DatagramPayload(sender: local, counter: sending.counter, content: .message(message))
        return .sendDatagram(payload, to: addr, sealing: .link(member, serial: sending.serial))
    }

    /// The member with link keys that `addr` reaches: one advertising it (a live one first, then the
    /// lowest id), else the one whose link-keyed datagrams came from it.
    private func keyedMember(at addr: String) -> MemberID? {
        var best: MemberInfo?
        for info in swim.members.values where info.addr == addr && info.id != local && datagramKeys.has(info.id) {
            guard let b = best else { best = info; continue }
            let (live, bestLive) = (Self.liveState(info.state), Self.liveState(b.state))
            if live != bestLive ? live : info.id < b.id { best = info }
        }
        if let best { return best.id }
        return datagramSources[addr].flatMap { datagramKeys.has($0) ? $0 : nil }
    }

    private static func liveState(_ state: MemberState) -> Bool { state == .alive || state == .suspect }
}
