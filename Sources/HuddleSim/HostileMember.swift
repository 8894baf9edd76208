import HuddleCore
import HuddleCrypto

/// What a hostile member of a simulated session sends its peers besides its honest traffic: it
/// holds the session key and a node key of its own, and uses them to lie. Every lie below must be
/// refused by an honest `SessionCore` (issue 20): forged membership records and claims, its own
/// `failed` claims about honest members (which never fail them, issue 33), a node-key
/// takeover, a member nobody is, a catch-up nobody asked for, a journal entry in another
/// uploader's name, a message in another origin's name, and a directed message sent again.
struct HostileMember {
    let info: MemberInfo
    let identity: Identity
    /// Its own directed message to each peer, signed once and sent again every round (a replay).
    private var directed: [MemberID: SignedMessage] = [:]

    init(info: MemberInfo, identity: Identity) {
        self.info = info
        self.identity = identity
    }

    /// The lies for `peer` in attack round `round`, about `victim` (an honest member other than
    /// `peer`) and in the name of `witness` (another honest member).
    mutating func lies(round: Int, to peer: MemberInfo, about victim: MemberInfo, witness: MemberInfo) -> [LinkMessage] {
        let r = UInt64(round)
        let takeover = MemberInfo(id: victim.id, node: identity.publicKey, name: victim.name, addr: info.addr, incarnation: 1000 + r).signed(by: identity)
        let forgedLeave = SWIMGossip.left(victim.id, incarnation: 1000 + r, signature: identity.sign(MembershipStatement.left(victim.id, incarnation: 1000 + r)))
        let inWitnessName = SWIMGossip.failed(victim.id, incarnation: victim.incarnation, from: witness.id, signature:
            identity.sign(MembershipStatement.claim(failed: true, about: victim.id, incarnation: victim.incarnation, by: witness.id)))
        // Its own signed claim that the victim failed, at the victim's current incarnation: it may
        // only start a suspicion the victim refutes, at most once per maximum suspicion timeout.
        let ownFailed = SWIMGossip.failed(victim.id, incarnation: victim.incarnation, from: info.id, signature:
            identity.sign(MembershipStatement.claim(failed: true, about: victim.id, incarnation: victim.incarnation, by: info.id)))
        let aboveIncarnation = SWIMGossip.suspect(peer.id, incarnation: 1_000_000 + r, from: info.id, signature:
            identity.sign(MembershipStatement.claim(failed: false, about: peer.id, incarnation: 1_000_000 + r, by: info.id)))
        let nobody = MemberInfo(id: MemberID(raw: 0xF00D_0000 + r), node: [UInt8](repeating: 9, count: 32), name: "nobody", addr: "192.0.2.1:1")
        let gossip = SWIMMessage(sender: info.id, kind: .gossip, gossip: [.alive(takeover), forgedLeave, inWitnessName, ownFailed, aboveIncarnation, .alive(nobody)])

        let (theirs, key) = foreignManifest(round: round, uploader: victim)

        let impersonation = MessageBatch.sign([WireMessage(origin: victim.id, counter: 1 << 40 + r, seq: 1, to: nil, body: [0x66])], identity: identity)[0]
        if directed[peer.id] == nil {
            directed[peer.id] = MessageBatch.sign([WireMessage(origin: info.id, counter: 1 << 41, seq: 0, to: [peer.id], body: Array("once".utf8))],
                                                  identity: identity)[0]
        }
        return [
            .swim(gossip),
            .baseline([victim.id: 1000 + r], nonApplication: [:]),
            .journal([.add(theirs, key: key)]),
            .message(impersonation),
            .message(directed[peer.id]!),
        ]
    }

    /// A manifest naming `uploader` (its id and node key) but signed by this member, and its key:
    /// sent as a catch-up nobody asked for, and announced in this member's own signed broadcast.
    func foreignManifest(round: Int, uploader: MemberInfo) -> (Manifest, [UInt8]) {
        let key = [UInt8](repeating: UInt8(truncatingIfNeeded: round), count: 32)
        var theirs = Manifest(name: "not mine \(round)", size: 1, chunkSize: 256 * 1024, chunkHashes: [[UInt8](repeating: 1, count: 32)], meta: [],
                              uploader: uploader.id, uploaderNodeKey: uploader.node, signature: [])
        theirs.sign(with: identity, key: key)
        return (theirs, key)
    }
}
