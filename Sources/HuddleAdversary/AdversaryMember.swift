import HuddleCore
import HuddleCrypto

/// A hostile member as the node sees it: a node key of its own, its own signed record, and a link
/// to one node that knows it as a member (its record went over in a push-pull). What it says is
/// signed by its own key, as an honest member's would be; what it says about others is what the
/// node must not believe (claims, forged records). Used by the hostile-member tests and
/// `huddle-bench`'s attack rows.
public struct AdversaryMember {
    public let identity: Identity
    public let info: MemberInfo
    public let link: AdversaryLink

    /// Links to `addr` as a new member (`identity` and `id` given: another link of that member).
    public init(addr: String, key: SessionKey, identity: Identity = .generate(), id: MemberID? = nil, name: String = "mallory") throws {
        self.identity = identity
        let id = id ?? MemberID(raw: UInt64.random(in: 1...(1 << 52)))
        info = MemberInfo(id: id, node: identity.publicKey, name: name, addr: "127.0.0.1:9").signed(by: identity)
        link = try AdversaryLink(addr: addr, key: key, identity: identity, info: info)
        try link.write(.pushPull(SWIMPushPull(join: false, members: [info])))
    }

    /// A claim signed by this member (or, signed by it, in `claimer`'s name) that `member` is
    /// suspect or failed at `incarnation`.
    public func claim(failed: Bool, about member: MemberID, incarnation: UInt64, inNameOf claimer: MemberID? = nil) -> SWIMGossip {
        let from = claimer ?? info.id
        let signature = identity.sign(MembershipStatement.claim(failed: failed, about: member, incarnation: incarnation, by: from))
        return failed ? .failed(member, incarnation: incarnation, from: from, signature: signature)
                      : .suspect(member, incarnation: incarnation, from: from, signature: signature)
    }

    /// Gossip `updates` to the node.
    public func gossip(_ updates: [SWIMGossip]) throws {
        try link.write(.swim(SWIMMessage(sender: info.id, kind: .gossip, gossip: updates)))
    }

    /// Its own record at `incarnation`, signed: it never answers probes, so it refutes every
    /// suspicion of itself this way to stay a live member (whose claims count).
    public func stayAlive(incarnation: UInt64) throws {
        var record = info
        record.incarnation = incarnation
        try gossip([.alive(record.signed(by: identity))])
    }
}
