import HuddleCrypto
import Testing
@testable import HuddleCore

/// Membership this member lacks, asked of the peer that shows it lacks it (issue 36): while many
/// join at once, gossip can take longer than `unknownOriginWait` to bring a new member's record to
/// one behind a NAT, which then cannot check that member's messages, link to it, or deliver what
/// depends on them. A message from or depending on a member not heard of, or a circuit offered
/// from one, makes it ask the peer that passed it on for a push-pull, at most once per
/// `SessionCore.membershipAskGap`.

private func identity(_ raw: UInt64) -> Identity { Identity(seed: [UInt8](repeating: UInt8(raw), count: 32)) }

private func info(_ raw: UInt64, _ name: String) -> MemberInfo {
    MemberInfo(id: MemberID(raw: raw), node: identity(raw).publicKey, name: name, addr: testAddr(name), incarnation: 0).signed(by: identity(raw))
}

private func core(_ member: MemberInfo, knowing others: [MemberInfo]) -> SessionCore {
    var c = SessionCore(local: member, identity: identity(member.id.raw), joining: false, swimSeed: member.id.raw, journalSeed: member.id.raw)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: others), from: others[0].addr, now: 1)
    return c
}

private func signed(_ m: WireMessage) -> SignedMessage { MessageBatch.sign([m], identity: identity(m.origin.raw))[0] }

/// The push-pull parts (not a join's) sent to `peer`.
private func asks(_ effects: [SessionEffect], of peer: MemberID) -> Int {
    effects.count(where: { if case let .sendLink(to, .pushPull(state)) = $0 { to == peer && !state.join } else { false } })
}

@Test func aMessageFromAMemberNotHeardOfAsksThePeerThatPassedItOnOncePerGap() {
    let me = info(5, "me"), relay = info(9, "relay"), stranger = info(13, "stranger")
    var c = core(me, knowing: [relay])
    _ = c.linkUp(relay.id)
    let first = signed(WireMessage(origin: stranger.id, counter: 1, seq: 1, to: nil, body: [1]))
    #expect(asks(c.receiveLink(.message(first), from: relay.id, addr: relay.addr, now: 2), of: relay.id) == 1)
    // Within the gap: not again, whatever arrives.
    let second = signed(WireMessage(origin: stranger.id, counter: 2, seq: 2, to: nil, body: [2]))
    #expect(asks(c.receiveLink(.message(second), from: relay.id, addr: relay.addr, now: 2 + SessionCore.membershipAskGap / 2), of: relay.id) == 0)
    #expect(asks(c.receiveLink(.message(second), from: relay.id, addr: relay.addr, now: 2 + SessionCore.membershipAskGap), of: relay.id) == 1)

    // The answer brings the stranger's signed record: its next message is checked and delivered.
    _ = c.receiveLink(.pushPullReply(SWIMPushPull(join: false, members: [relay, stranger])), from: relay.id, addr: relay.addr, now: 4)
    #expect(c.swim.members[stranger.id] != nil)
    _ = c.linkHello(from: stranger.id, since: 0, nonApplication: 0, now: 4)
    let delivered = c.receiveLink(.message(first), from: relay.id, addr: relay.addr, now: 4)
    #expect(delivered.contains(.deliver(first)))
}

@Test func aDependencyOnAMemberNotHeardOfAsksButOneOnAKnownMemberDoesNot() {
    let me = info(5, "me"), peer = info(9, "peer"), known = info(11, "known"), stranger = info(13, "stranger")
    var c = core(me, knowing: [peer, known])
    _ = c.linkUp(peer.id)
    _ = c.linkHello(from: peer.id, since: 0, nonApplication: 0, now: 1)
    // Depends on a member in membership but not linked yet: the link will come, nothing to ask.
    let onKnown = signed(WireMessage(origin: peer.id, counter: 1, seq: 1, deps: [.init(member: known.id, seq: 1)], to: nil, body: [1]))
    #expect(asks(c.receiveLink(.message(onKnown), from: peer.id, addr: peer.addr, now: 2), of: peer.id) == 0)
    // Depends on a member nobody told this one of: the peer is asked.
    let onStranger = signed(WireMessage(origin: peer.id, counter: 2, seq: 2, deps: [.init(member: stranger.id, seq: 1)], to: nil, body: [2]))
    #expect(asks(c.receiveLink(.message(onStranger), from: peer.id, addr: peer.addr, now: 2), of: peer.id) == 1)
}

@Test func aCircuitOfferedFromAMemberNotHeardOfIsRefusedAndItsRecordAskedOfTheRelay() {
    let me = info(5, "me"), relay = info(9, "relay"), stranger = info(13, "stranger")
    var c = core(me, knowing: [relay])
    _ = c.linkUp(relay.id)
    let effects = c.receiveLink(.circuitOffer(peer: stranger.id), from: relay.id, addr: relay.addr, now: 2)
    #expect(effects.contains(.sendLink(relay.id, .circuitRefuse(peer: stranger.id, reason: "not_taken"))))
    #expect(asks(effects, of: relay.id) == 1)
}

/// The peer asked may not know the member either: while messages still wait on one not heard of,
/// the tick asks the linked members in turn, every twice the gap, and stops once it is known.
@Test func whileMessagesStillWaitOnAMemberNotHeardOfTheTickAsksTheLinkedMembersInTurn() {
    let me = info(5, "me"), a = info(9, "a"), b = info(11, "b"), stranger = info(13, "stranger")
    var c = core(me, knowing: [a, b])
    for peer in [a, b] {
        _ = c.linkUp(peer.id)
        _ = c.linkHello(from: peer.id, since: 0, nonApplication: 0, now: 1)
    }
    let waiting = signed(WireMessage(origin: a.id, counter: 1, seq: 1, deps: [.init(member: stranger.id, seq: 1)], to: nil, body: [1]))
    #expect(asks(c.receiveLink(.message(waiting), from: a.id, addr: a.addr, now: 2), of: a.id) == 1)
    func asked(at now: Double) -> [MemberID] {
        c.tick(now: now).compactMap { if case let .sendLink(to, .pushPull(state)) = $0, !state.join { to } else { nil } }
    }
    #expect(asked(at: 3).isEmpty, "within twice the gap of the last ask")
    let first = asked(at: 2 + 2 * SessionCore.membershipAskGap)
    let second = asked(at: 2 + 4 * SessionCore.membershipAskGap)
    #expect(first.count == 1 && second.count == 1 && Set(first + second) == [a.id, b.id], "in turn: \(first) then \(second)")
    // Known now (b's answer): nothing more is asked.
    _ = c.receiveLink(.pushPullReply(SWIMPushPull(join: false, members: [a, b, stranger])), from: b.id, addr: b.addr, now: 7)
    #expect(asked(at: 2 + 8 * SessionCore.membershipAskGap).isEmpty)
}
