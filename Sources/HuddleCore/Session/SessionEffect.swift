/// What the session core asks its shell (the node, or the simulator) to do, in order.
public enum SessionEffect: Sendable, Equatable {
    /// Send a SWIM message as one datagram to `host:port`.
    case sendDatagram(SWIMMessage, to: String)
    /// Exchange full membership state with `host:port` over its link (dialing it first if needed).
    case pushPull(to: String, join: Bool)
    /// Send one link message to `peer` (dropped when no link to it is up).
    case sendLink(MemberID, LinkMessage)
    /// Send one link message on every link.
    case sendToLinks(LinkMessage)
    /// Open a link to `host:port`.
    case dial(String)
    /// Close the link to a member that failed or left.
    case closeLink(MemberID)
    /// A member event for the control socket.
    case member(MemberChange, MemberInfo)
    /// Deliver a broadcast or directed message here.
    case deliver(SignedMessage)
    /// Deliver an unreliable message here.
    case deliverUnreliable(WireMessage)
    /// A datagram was refused (a replay, or older than the sender's window): count it.
    case datagramRefused
    /// Ask `peer` for `origin`'s broadcasts `from...to`.
    case repairRequest(peer: MemberID, origin: MemberID, from: UInt64, to: UInt64)
    /// What the journal decided (chunk requests, haves, attachment events, deletions).
    case journal(Journal.Effect)
}
