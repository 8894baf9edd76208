import HuddleCrypto

/// What the session core asks its shell (the node, or the simulator) to do, in order.
public enum SessionEffect: Sendable, Equatable {
    /// Send a SWIM message or an unreliable message as one datagram to `host:port`, sealed as
    /// `sealing` says (`DatagramKeyring.seal`).
    case sendDatagram(DatagramPayload, to: String, sealing: DatagramSealing)
    /// Send one link message to `peer` (dropped when no link to it is up).
    case sendLink(MemberID, LinkMessage)
    /// Send one link message on every link.
    case sendToLinks(LinkMessage)
    /// Open a link to `host:port` unless a dial to it is in flight. `pushPull` (join or not): once
    /// the link is up, exchange full membership state over it (`SessionCore.pushPullRequest`).
    case dial(String, pushPull: Bool?)
    /// Close the link to a member that failed or left.
    case closeLink(MemberID)
    /// A member event for the control socket.
    case member(MemberChange, MemberInfo)
    /// Deliver a broadcast or directed message here.
    case deliver(SignedMessage)
    /// `member`'s messages `fromSeq...toSeq` (application seqs, as the control protocol numbers
    /// them) will never be delivered here: nobody stores them any more (the `gap` event).
    case gap(member: MemberID, fromSeq: UInt64, toSeq: UInt64)
    /// Deliver an unreliable message here.
    case deliverUnreliable(WireMessage)
    /// Deliver here a reliable message this member sent to itself (among others).
    case deliverOwn(WireMessage)
    /// This member's messages wait in a batch: call `flushBatch` soon (after the current input).
    case flushSoon
    /// Retransmit buffers were full and no longer are: sends that waited may go on.
    case congestionCleared
    /// The activity value changed.
    case activityChanged
    /// `count` messages or records claimed `origin` but were not signed by its node key.
    case forged(origin: MemberID, count: Int)
    /// A signed broadcast from `origin` could not be decoded as `what`.
    case unreadable(MemberID, what: String)
    /// `count` stored messages were sent again in answer to a repair request.
    case retransmitted(Int)
    /// Send chunk `index` of attachment `id` (which this member holds) to `peer`.
    case serveChunk(to: MemberID, id: String, index: Int)
    /// `peer` says the copy of a chunk this member holds and sent it failed its hash: check the stored copy.
    case recheckChunk(id: String, index: Int, reportedBy: MemberID)
    /// The first input refused for this reason (later ones are only counted in `refusals`): log it.
    case refused(Refusal)
    /// Ask `peer` for `origin`'s broadcasts `from...to`.
    case repairRequest(peer: MemberID, origin: MemberID, from: UInt64, to: UInt64)
    /// What the journal decided (chunk requests, haves, attachment events, deletions).
    case journal(Journal.Effect)
    /// This member moved to a new epoch and holds its key (issue 21): new links, session-key
    /// datagrams and the key file use it from now on (`SessionKey.rewrite(at:)`).
    case epochMoved(SessionKey)
    /// This member's node key was removed from the session by the member with node key `by`
    /// (its member id when known): it holds no key of the session any more.
    case epochRemoved(by: [UInt8], member: MemberID?)
    /// A member's node key was removed (by `by`, when the remover's member id is known): its
    /// links are closed and it is refused from now on. Shown as a `member` event `removed`.
    case memberRemoved(MemberInfo, by: MemberID?)
    /// A circuit with `peer` through the relay `via` is open (`SessionCore+Relay`): run a link over
    /// it (`initiator`: this member starts the handshake), its bytes sent as `circuitData` to `via`.
    case circuitUp(peer: MemberID, via: MemberID, initiator: Bool)
    /// Bytes of the link over the circuit with `peer` through `via`, for that link's reader.
    case circuitBytes(peer: MemberID, via: MemberID, [UInt8])
    /// The circuit with `peer` through `via` closed: end the link over it.
    case circuitDown(peer: MemberID, via: MemberID)
    /// Hole punching (`SessionCore+Punch`): dial `addrs` (the peer's signed reach addresses) from
    /// the listening port, so the NAT maps the dial as it maps what members see of this member;
    /// `initiator`: this member starts the link's handshake (the lower member id, at both ends).
    case punchDial(peer: MemberID, addrs: [String], initiator: Bool)
    /// Programs joined or left activities, as this member shows them (`SessionCore+Participants`).
    case participants([ParticipantChange])
}

/// How the shell seals a datagram the core sends; the core chose it (`SessionCore+Datagrams`).
public enum DatagramSealing: Sendable, Equatable {
    /// The session-key form (`DatagramSeal`): only a bare ping or ack, to a member this member
    /// holds no link keys with.
    case session
    /// Under the send key `serial` of the link keys held with `recipient` (`PairDatagramSeal`).
    case link(MemberID, serial: UInt64)
}
