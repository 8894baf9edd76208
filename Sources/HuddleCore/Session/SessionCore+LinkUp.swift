import HuddleCrypto

/// A new link whose handshake finished (`SessionCore.linkEstablished`): what the handshake proved
/// (`nodeKey`, `keyHead`, `datagramKeys`) beside what the peer only says (`peer`, its record), which
/// the core holds against it before anything else.
public struct LinkCandidate: Sendable {
    /// The peer's record as it named itself (sent in the handshake's payload).
    public var peer: MemberInfo
    /// The node key the handshake proved (the owner of the peer's static key): the record must
    /// name it, or the link is refused (`linkEstablished`).
    public var nodeKey: [UInt8]
    /// The head of the epoch whose key the handshake proved.
    public var keyHead: [UInt8]
    /// The pair's datagram keys, from the handshake's exporter, oriented for this end.
    public var datagramKeys: PairDatagramKeys
    /// Which end dialed: the duplicate rule keeps the link dialed by the lower member id.
    public var dialer: MemberID
    /// The relay, when the link runs over a circuit (`SessionCore+Relay`).
    public var via: MemberID?
    /// The socket's addresses (`host:port`) for a direct link ("" when unknown): what each end sees
    /// of the other (`SessionCore+Reach`). `remote` is the peer's end as this member sees it.
    public var remote: String
    /// This member's end of the socket, as its own socket names it.
    public var local: String

    public init(peer: MemberInfo, nodeKey: [UInt8], keyHead: [UInt8], datagramKeys: PairDatagramKeys, dialer: MemberID, via: MemberID? = nil, remote: String = "", local: String = "") {
        self.peer = peer
        self.nodeKey = nodeKey
        self.keyHead = keyHead
        self.datagramKeys = datagramKeys
        self.dialer = dialer
        self.via = via
        self.remote = remote
        self.local = local
    }
}

/// What the shell does with a new link (`SessionCore.linkEstablished`).
public enum LinkDecision: Sendable {
    /// Close the new link: refused (one of `CoreError`'s link codes; the reason is counted in `refusals`).
    case refused(CoreError)
    /// Close the new link: the link up to that peer stays (the duplicate rule). Its datagram keys
    /// are kept for a moment, retired, for what the peer sent under them.
    case duplicate
    /// The link serves as the link to the peer: in this order,
    /// 1. when `replaces`, close the link that was up to that peer (it lost the duplicate rule);
    /// 2. run `before` (this member's waiting batch, for the links that were up already);
    /// 3. put the link in the table and send `hello` on it, first of everything;
    /// 4. run `after` (the path or addresses event, the epoch head).
    case admitted(replaces: Bool, before: [SessionEffect], hello: LinkMessage, after: [SessionEffect])
}

extension SessionCore {
    /// A link's handshake completed: decides admission (first that the record names the node key
    /// the handshake proved, then `admitLink`; for a relayed link, the circuit), the duplicate (`LinkPlanner.keepsNewLink`), and the link-up sequence — flush, hello,
    /// then the path and epoch head. The node and the simulator both take a link up through here.
    public mutating func linkEstablished(_ link: LinkCandidate, now: Double) -> LinkDecision {
        let peer = link.peer.id
        // A record in another node key's name than the handshake proved speaks for someone else.
        guard link.peer.node == link.nodeKey else {
            ownRefusals.add(.recordNodeKey)
            return .refused(.recordNamesAnotherNodeKey)
        }
        do { try admitLink(link.peer, keyHead: link.keyHead, now: now) } catch { return .refused(error) }
        if let via = link.via, !admitsRelayedLink(peer, via: via) { return .refused(.noCircuitForLink) }
        let replaces = planner.linked.contains(peer)
        if replaces {
            guard LinkPlanner.keepsNewLink(newDialedBy: link.dialer, existingDialedBy: linkDialers[peer] ?? local,
                                           newRelayed: link.via != nil, existingRelayed: relayedLinks[peer] != nil) else {
                installDatagramKeys(link.datagramKeys, for: peer, current: false, now: now)
                return .duplicate
            }
        }
        installDatagramKeys(link.datagramKeys, for: peer, current: true, now: now)
        linkDialers[peer] = link.dialer
        let before = flushBatch()
        let hello = linkUp(peer, via: link.via, now: now)
        var after = link.via != nil ? relayedPathEvent(peer) : linkAddresses(peer, remote: link.remote, local: link.local, now: now)
        after += epochLinkUp(peer, now: now)
        // This member's directed messages the peer has not acknowledged, again and in order: the
        // link they went on may have closed with them queued (or they were made while no link was up).
        after += broadcast.directedOut.unacknowledged(for: peer).map { SessionEffect.sendLink(peer, .message($0)) }
        return .admitted(replaces: replaces, before: before, hello: hello, after: after)
    }
}
