import HuddleCrypto
import Testing
@testable import HuddleCore

/// Unreliable messages to a member whose datagrams may not arrive (issue 36): a member linked from
/// behind a NAT or through a relay is sent them over its link (`LinkMessage.unreliable`), once,
/// as a datagram would carry them; everyone else still by link-keyed datagram. The receiver holds
/// the link form to the datagram form's rules.

private func info(_ raw: UInt64, _ name: String) -> MemberInfo {
    let identity = Identity(seed: [UInt8](repeating: UInt8(raw), count: 32))
    return MemberInfo(id: MemberID(raw: raw), node: identity.publicKey, name: name, addr: testAddr(name), incarnation: 0).signed(by: identity)
}

private func core(_ member: MemberInfo, knowing others: [MemberInfo]) -> SessionCore {
    var c = SessionCore(local: member, identity: Identity(seed: [UInt8](repeating: UInt8(member.id.raw), count: 32)),
                        joining: false, swimSeed: member.id.raw, journalSeed: member.id.raw)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: others), from: others[0].addr, now: 1)
    return c
}

private func linkForms(_ effects: [SessionEffect]) -> [(MemberID, WireMessage)] {
    effects.compactMap { if case let .sendLink(to, .unreliable(m)) = $0 { (to, m) } else { nil } }
}

private func datagramRecipients(_ effects: [SessionEffect]) -> [MemberID] {
    effects.compactMap { if case let .sendDatagram(payload, _, .link(to, _)) = $0, case .message = payload.content { to } else { nil } }
}

@Test func anUnreliableMessageToAMemberBehindANATGoesOverItsLinkAndToOthersAsADatagram() throws {
    let me = info(5, "me"), natted = info(9, "natted"), plain = info(11, "plain")
    var c = core(me, knowing: [natted, plain])
    for peer in [natted, plain] {
        _ = c.linkUp(peer.id)
        c.installDatagramKeys(PairDatagramKeys(seed: [UInt8(peer.id.raw)]), for: peer.id, current: true, now: 1)
    }
    // The natted member's link comes from another host than the address it advertises.
    _ = c.linkAddresses(natted.id, remote: "198.51.100.1:40000", local: me.addr, now: 1)
    _ = c.linkAddresses(plain.id, remote: plain.addr, local: me.addr, now: 1)

    let (message, effects) = try c.send(body: Array("hello".utf8), to: nil, reliable: false)
    #expect(linkForms(effects).map(\.0) == [natted.id] && linkForms(effects).first?.1 == message,
            "over the link to the member behind a NAT only")
    #expect(datagramRecipients(effects) == [plain.id], "a datagram to the member reached at its own address")

    // The link form travels as any link message and is delivered once by the recipient.
    let encoded = LinkMessage.unreliable(message).encoded()
    #expect(try LinkMessage.decode(encoded) == .unreliable(message))
    var n = core(natted, knowing: [me])
    let delivered = n.receiveLink(try LinkMessage.decode(encoded), from: me.id, addr: me.addr, now: 2)
    #expect(delivered == [.deliverUnreliable(message)])
}

@Test func theLinkFormIsHeldToTheDatagramFormsRules() {
    let me = info(5, "me"), peer = info(9, "peer"), third = info(13, "third")
    var n = core(peer, knowing: [me, third])
    let fine = WireMessage(origin: me.id, counter: 1, seq: 0, to: nil, body: [1])
    #expect(n.receiveLink(.unreliable(fine), from: me.id, addr: me.addr, now: 2) == [.deliverUnreliable(fine)])
    // Not its own origin, a seq (a reliable message's), or for someone else: nothing delivered.
    let forged = WireMessage(origin: third.id, counter: 1, seq: 0, to: nil, body: [1])
    #expect(n.receiveLink(.unreliable(forged), from: me.id, addr: me.addr, now: 2).isEmpty)
    let sequenced = WireMessage(origin: me.id, counter: 2, seq: 4, to: nil, body: [1])
    #expect(n.receiveLink(.unreliable(sequenced), from: me.id, addr: me.addr, now: 2).isEmpty)
    let elsewhere = WireMessage(origin: me.id, counter: 3, seq: 0, to: [third.id], body: [1])
    #expect(n.receiveLink(.unreliable(elsewhere), from: me.id, addr: me.addr, now: 2).isEmpty)
    // A body no datagram could carry (a link message could): refused and counted.
    let huge = WireMessage(origin: me.id, counter: 4, seq: 0, to: nil, body: [UInt8](repeating: 0, count: SessionCore.Limits.unreliableCeiling + 1))
    #expect(n.receiveLink(.unreliable(huge), from: me.id, addr: me.addr, now: 2).contains(.refused(.bodyTooLarge)))
    #expect(n.refusals[.bodyTooLarge] == 1)
}

/// Punching over UDP: a member linked from behind a NAT is sent an opening datagram every
/// `UDPPaths.interval`; once its own link-keyed datagram comes from an address, its unreliable
/// messages go there by datagram, until that path has been silent for `UDPPaths.fresh`; SWIM
/// stays on the link.
@Test func aMemberBehindANATIsSentUnreliableMessagesByDatagramOnceItsOwnDatagramsComeThrough() throws {
    let me = info(5, "me"), natted = info(9, "natted")
    var c = core(me, knowing: [natted])
    _ = c.linkUp(natted.id)
    c.installDatagramKeys(PairDatagramKeys(seed: [9]), for: natted.id, current: true, now: 1)
    let linkFrom = "198.51.100.9:7400"
    _ = c.linkAddresses(natted.id, remote: linkFrom, local: me.addr, now: 1)

    // Opening datagrams: to the address its link comes from (no reach address signed), once per interval.
    func openings(_ effects: [SessionEffect]) -> [(String, UInt64)] {
        effects.compactMap {
            if case let .sendDatagram(payload, addr, .link(to, serial)) = $0, to == natted.id, case let .swim(m) = payload.content, m.kind == .gossip { (addr, serial) } else { nil }
        }
    }
    let first = openings(c.tick(now: 2))
    #expect(first.map(\.0) == [linkFrom])
    #expect(openings(c.tick(now: 2.5)).isEmpty, "at most one round per interval")
    let serial = try #require(first.first?.1)

    // Before any of its datagrams came through: over the link.
    var (_, effects) = try c.send(body: [1], to: [natted.id], reliable: false)
    #expect(linkForms(effects).map(\.0) == [natted.id])

    // Its datagram with a source on a host it is not known at (one on the path rewrote it): no path.
    let rewritten = OpenedDatagram(DatagramPayload(sender: natted.id, counter: 5, content: .swim(SWIMMessage(sender: natted.id, kind: .gossip))), form: .link(serial: serial))
    _ = c.receiveDatagram(rewritten, from: "203.0.113.50:9999", now: 2.8)
    #expect(c.udpPaths.address(of: natted.id) == nil, "a source on a third host is no path")

    // Its datagram comes from its NAT's UDP mapping: that is its path.
    let mapped = "198.51.100.9:40001"
    let opened = OpenedDatagram(DatagramPayload(sender: natted.id, counter: 6, content: .swim(SWIMMessage(sender: natted.id, kind: .gossip))), form: .link(serial: serial))
    _ = c.receiveDatagram(opened, from: mapped, now: 3)
    #expect(c.udpPaths.address(of: natted.id) == mapped)
    (_, effects) = try c.send(body: [2], to: [natted.id], reliable: false)
    #expect(linkForms(effects).isEmpty && effects.contains { if case .sendDatagram(_, mapped, .link(natted.id, _)) = $0 { true } else { false } },
            "by datagram to the path")
    // Keepalives go to the path alone.
    #expect(openings(c.tick(now: 4.5)).map(\.0) == [mapped])

    // SWIM keeps to the link.
    let probe = c.datagram(SWIMMessage(sender: me.id, kind: .ping(seq: 1, target: natted.id)), to: natted.addr)
    #expect(probe == .sendLink(natted.id, .swim(SWIMMessage(sender: me.id, kind: .ping(seq: 1, target: natted.id)))))

    // Silent for `fresh`: back to the link; its link closing forgets the path.
    // (The path's clock alone moves here: the whole core's tick would fail the member by now, its
    // probes unanswered in this test.)
    _ = c.udpPaths.sweepDue(now: 3 + UDPPaths.fresh + 0.1)
    (_, effects) = try c.send(body: [3], to: [natted.id], reliable: false)
    #expect(linkForms(effects).map(\.0) == [natted.id])
    _ = c.receiveDatagram(OpenedDatagram(DatagramPayload(sender: natted.id, counter: 7, content: .swim(SWIMMessage(sender: natted.id, kind: .gossip))), form: .link(serial: serial)), from: mapped, now: 10)
    #expect(c.udpPaths.address(of: natted.id) == mapped)
    _ = c.linkDown(natted.id, settled: false, now: 11)
    #expect(c.udpPaths.address(of: natted.id) == nil)
}

/// A member reached at its own address needs no path: nothing is opened towards it, and a datagram
/// from its own address is no path.
@Test func aMemberReachedAtItsOwnAddressIsSentNoOpeningDatagrams() {
    let me = info(5, "me"), plain = info(11, "plain")
    var c = core(me, knowing: [plain])
    _ = c.linkUp(plain.id)
    c.installDatagramKeys(PairDatagramKeys(seed: [11]), for: plain.id, current: true, now: 1)
    _ = c.linkAddresses(plain.id, remote: plain.addr, local: me.addr, now: 1)
    let effects = c.tick(now: 2) + c.tick(now: 5)
    #expect(!effects.contains { if case let .sendDatagram(p, _, .link(plain.id, _)) = $0, case let .swim(m) = p.content { m.kind == .gossip && m.gossip.isEmpty } else { false } })
    #expect(c.udpPaths.address(of: plain.id) == nil)
}
