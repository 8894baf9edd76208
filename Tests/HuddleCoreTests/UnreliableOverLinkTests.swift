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
    let fine = WireMessage(from: me.id, counter: 1, seq: 0, to: nil, body: [1])
    #expect(n.receiveLink(.unreliable(fine), from: me.id, addr: me.addr, now: 2) == [.deliverUnreliable(fine)])
    // Not its own origin, a seq (a reliable message's), or for someone else: nothing delivered.
    let forged = WireMessage(from: third.id, counter: 1, seq: 0, to: nil, body: [1])
    #expect(n.receiveLink(.unreliable(forged), from: me.id, addr: me.addr, now: 2).isEmpty)
    let sequenced = WireMessage(from: me.id, counter: 2, seq: 4, to: nil, body: [1])
    #expect(n.receiveLink(.unreliable(sequenced), from: me.id, addr: me.addr, now: 2).isEmpty)
    let elsewhere = WireMessage(from: me.id, counter: 3, seq: 0, to: [third.id], body: [1])
    #expect(n.receiveLink(.unreliable(elsewhere), from: me.id, addr: me.addr, now: 2).isEmpty)
    // A body no datagram could carry (a link message could): refused and counted.
    let huge = WireMessage(from: me.id, counter: 4, seq: 0, to: nil, body: [UInt8](repeating: 0, count: SessionCore.Limits.unreliableCeiling + 1))
    #expect(n.receiveLink(.unreliable(huge), from: me.id, addr: me.addr, now: 2).contains(.refused(.bodyTooLarge)))
    #expect(n.refusals[.bodyTooLarge] == 1)
}
