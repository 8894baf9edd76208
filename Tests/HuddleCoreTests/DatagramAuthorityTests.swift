import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 20, item 3: datagrams authenticate their sender and bind their recipient. Pure tests of
/// the sealed forms, the keyring and the rules of `SessionCore+Datagrams`.
/// Member `raw`'s node key (seeded by `raw`), which signs its records and claims.
private func identity(_ raw: UInt64) -> Identity { Identity(seed: [UInt8](repeating: UInt8(raw), count: 32)) }

private func info(_ raw: UInt64, _ name: String) -> MemberInfo {
    MemberInfo(id: MemberID(raw: raw), node: identity(raw).publicKey, name: name, addr: testAddr(name)).signed(by: identity(raw))
}

private let me = info(5, "me"), x = info(9, "x"), y = info(11, "y")
private let session = DatagramSeal(key: [UInt8](repeating: 42, count: 32))

private func core(knowing members: [MemberInfo] = [x, y]) -> SessionCore {
    var c = SessionCore(local: me, identity: Identity(seed: [UInt8](repeating: 5, count: 32)), joining: false, swimSeed: 1, journalSeed: 1)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: members), from: testAddr("x"), now: 1)
    return c
}

/// `claimer`'s signed claim that `member` is suspect at incarnation 0.
private func suspicion(of member: MemberInfo, by claimer: MemberInfo) -> SWIMGossip {
    .suspect(member.id, incarnation: 0, from: claimer.id,
             signature: identity(claimer.id.raw).sign(MembershipStatement.claim(failed: false, about: member.id, incarnation: 0, by: claimer.id)))
}

private func swim(_ sender: MemberID, _ kind: SWIMMessage.Kind, gossip: [SWIMGossip] = [], counter: UInt64 = 1) -> DatagramPayload {
    DatagramPayload(sender: sender, counter: counter, content: .swim(SWIMMessage(sender: sender, kind: kind, gossip: gossip)))
}

private func sessionKeyed(_ payload: DatagramPayload) -> OpenedDatagram { OpenedDatagram(payload, form: .session) }

private func datagrams(_ effects: [SessionEffect]) -> [(DatagramPayload, String, DatagramSealing)] {
    effects.compactMap { if case let .sendDatagram(p, to, s) = $0 { (p, to, s) } else { nil } }
}

// MARK: the sealed forms

@Test func aLinkKeyedDatagramOpensOnlyAtItsRecipientUnderItsSendersKey() throws {
    let keys = PairDatagramKeys(seed: [1])            // as x holds them
    var mine = DatagramKeyring()                       // as `me` holds them
    let serial = mine.install(keys.reversed, for: x.id, current: true, now: 0)
    let opener = DatagramOpener(local: me.id, session: session, keys: mine)
    let payload = swim(x.id, .gossip, gossip: [.suspect(y.id, incarnation: 1, from: x.id)])
    let sealed = PairDatagramSeal.seal(payload.encoded(), from: x.id, to: me.id, keyID: keys.sendID, key: keys.send)
    #expect(try opener.open(sealed) == OpenedDatagram(payload, form: .link(serial: serial)))

    // Sealed for another recipient: the additional data binds it, the same key does not open it here.
    let forY = PairDatagramSeal.seal(payload.encoded(), from: x.id, to: y.id, keyID: keys.sendID, key: keys.send)
    #expect(throws: CoreError.self) { try opener.open(forY) }
    // Another pair's key (y's link with me, or a key holder's own link) does not open it as x's.
    var withY = DatagramKeyring()
    withY.install(PairDatagramKeys(seed: [2]).reversed, for: y.id, current: true, now: 0)
    let other = PairDatagramKeys(seed: [2])
    let asX = PairDatagramSeal.seal(payload.encoded(), from: x.id, to: me.id, keyID: keys.sendID, key: other.send)
    #expect(throws: CoreError.self) { try opener.open(asX) }
    // y's own link key opens y's datagrams only as y's: a header naming y, a payload naming x, is refused.
    mine.install(other.reversed, for: y.id, current: true, now: 0)
    let both = DatagramOpener(local: me.id, session: session, keys: mine)
    let yClaimsX = PairDatagramSeal.seal(payload.encoded(), from: y.id, to: me.id, keyID: other.sendID, key: other.send)
    #expect(throws: CoreError.self) { try both.open(yClaimsX) }
    // The header's sender is authenticated: swapping it for x's breaks the seal.
    var relabelled = yClaimsX
    relabelled.replaceSubrange(1..<9, with: withUnsafeBytes(of: x.id.raw.bigEndian) { Array($0) })
    #expect(throws: CoreError.self) { try both.open(relabelled) }
    // Tampering anywhere fails; the session form opens as `.session` (a claim only).
    var flipped = sealed
    flipped[flipped.count - 1] ^= 1
    #expect(throws: CoreError.self) { try opener.open(flipped) }
    #expect(try opener.open(session.seal(payload.encoded())).form == .session)
    #expect(throws: CoreError.self) { try opener.open([9, 1, 2]) }
    #expect(throws: CoreError.self) { try opener.open([]) }
}

// MARK: the keyring

@Test func theKeyringKeepsReplacedKeysForTheGraceThenDropsThem() {
    var ring = DatagramKeyring()
    let first = ring.install(PairDatagramKeys(seed: [1]), for: x.id, current: true, now: 0)
    #expect(ring.nextSend(to: x.id) == .init(serial: first, counter: 1))
    #expect(ring.nextSend(to: x.id) == .init(serial: first, counter: 2))
    // A re-dial replaces the link: the new key seals from now on, counting from 1, and the old one still opens.
    let second = ring.install(PairDatagramKeys(seed: [2]), for: x.id, current: true, now: 10)
    #expect(ring.nextSend(to: x.id) == .init(serial: second, counter: 1))
    #expect(ring.check(x.id, serial: first, counter: 3) == .fresh)
    #expect(ring.nextExpiry == 10 + DatagramKeyring.grace)
    ring.expire(now: 10 + DatagramKeyring.grace)
    #expect(ring.check(x.id, serial: first, counter: 4) == nil, "dropped after the grace")
    #expect(ring.check(x.id, serial: second, counter: 1) == .fresh)
    // The link closes: its key retires, still seals while nothing newer exists, then goes.
    ring.retire(x.id, now: 20)
    #expect(ring.has(x.id) && ring.nextSend(to: x.id)?.serial == second)
    ring.expire(now: 20 + DatagramKeyring.grace)
    #expect(!ring.has(x.id) && ring.nextSend(to: x.id) == nil && ring.nextExpiry == .infinity)
    // A duplicate link that lost is retired from the start; a member that fails is forgotten at once.
    let lost = ring.install(PairDatagramKeys(seed: [3]), for: y.id, current: false, now: 30)
    #expect(ring.nextExpiry == 30 + DatagramKeyring.grace && ring.nextSend(to: y.id)?.serial == lost)
    ring.forget(y.id)
    #expect(!ring.has(y.id))
    // At most `entriesPerMember` keys per member, however often it re-links.
    for k in 0..<10 { ring.install(PairDatagramKeys(seed: [UInt8(k)]), for: x.id, current: true, now: 40) }
    #expect(DatagramOpener(local: me.id, session: session, keys: ring).entries[x.id]?.count == DatagramKeyring.entriesPerMember)
}

@Test func eachKeysReplayWindowStartsAtZeroAndRefusesHugeJumps() {
    var ring = DatagramKeyring()
    let serial = ring.install(PairDatagramKeys(seed: [1]), for: x.id, current: true, now: 0)
    #expect(ring.check(x.id, serial: serial, counter: ReplayWindow.maximumJump + 1) == .jump, "a first counter beyond the jump")
    #expect(ring.check(x.id, serial: serial, counter: 5) == .fresh)
    #expect(ring.check(x.id, serial: serial, counter: 5) == .replayed)
    #expect(ring.check(x.id, serial: serial, counter: 0) == .replayed)
    #expect(ring.check(x.id, serial: serial, counter: .max) == .jump)
    #expect(ring.check(x.id, serial: serial, counter: 5 + ReplayWindow.maximumJump) == .fresh, "a jump of exactly the limit")
    #expect(ring.check(x.id, serial: serial, counter: 6) == .replayed, "behind the window now")
}

@Test func aReplayWindowRefusesAJumpPastTheLimitButTakesAnyFirstCounterWhenShared() {
    var shared = ReplayWindow()
    #expect(shared.check(1 << 40) == .fresh, "a counter shared with other receivers starts anywhere")
    #expect(shared.check((1 << 40) + ReplayWindow.maximumJump + 1) == .jump)
    #expect(shared.check((1 << 40) + 1) == .fresh, "a refused jump moved nothing")
}

// MARK: what each form may do

@Test func underTheSessionKeyOnlyABarePingIsAnsweredWithABareSessionKeyedAck() {
    var c = core()
    let answer = c.receiveDatagram(sessionKeyed(swim(x.id, .ping(seq: 7, target: me.id))), from: testAddr("x"), now: 2)
    let sent = datagrams(answer)
    #expect(sent.count == 1 && sent.first?.1 == testAddr("x") && sent.first?.2 == .session)
    if case let .swim(ack)? = sent.first?.0.content { #expect(ack.kind == .ack(seq: 7) && ack.gossip.isEmpty) } else { Issue.record("no ack: \(answer)") }
    // Gossip, indirect probes, nacks, a ping carrying gossip, an application message: refused.
    let suspicion = suspicion(of: y, by: x)
    let refused: [DatagramPayload] = [
        swim(x.id, .gossip, gossip: [suspicion], counter: 2),
        swim(x.id, .ping(seq: 8, target: me.id), gossip: [suspicion], counter: 3),
        swim(x.id, .pingReq(seq: 9, target: y.id, targetAddr: testAddr("y")), counter: 4),
        swim(x.id, .nack(seq: 1), counter: 5),
        DatagramPayload(sender: x.id, counter: 6, content: .message(WireMessage(origin: x.id, counter: 1, seq: 0, to: nil, body: [1]))),
    ]
    for payload in refused {
        #expect(datagrams(c.receiveDatagram(sessionKeyed(payload), from: testAddr("x"), now: 2)).isEmpty, "\(payload)")
    }
    #expect(c.refusals[.unauthenticatedDatagram] == refused.count)
    #expect(c.swim.members[y.id]?.state == .alive, "nobody's state changed")
}

@Test func aSessionKeyedAckCountsOnlyForThisMembersOwnProbeOfItsSenderWhileNoLinkExists() {
    var c = core(knowing: [x])
    // Probe x: the ping goes out in the session form (no link yet), bare.
    var ping: (seq: UInt32, effects: [SessionEffect])?
    for t in stride(from: 1.0, through: 3.0, by: 0.1) {
        let effects = c.tick(now: t)
        if let (payload, _, sealing) = datagrams(effects).first, case let .swim(m) = payload.content, case let .ping(seq, target) = m.kind {
            #expect(target == x.id && sealing == .session && m.gossip.isEmpty)
            ping = (seq, effects)
            break
        }
    }
    guard let ping else { Issue.record("no probe of x"); return }
    // An ack claiming to be y's, or x's with another seq, does not answer it; x's own does.
    _ = c.receiveDatagram(sessionKeyed(swim(y.id, .ack(seq: ping.seq))), from: testAddr("y"), now: 3.1)
    _ = c.receiveDatagram(sessionKeyed(swim(x.id, .ack(seq: ping.seq &+ 1), counter: 1)), from: testAddr("x"), now: 3.1)
    #expect(c.refusals[.unauthenticatedDatagram] == 2)
    #expect(c.swim.probe != nil)
    _ = c.receiveDatagram(sessionKeyed(swim(x.id, .ack(seq: ping.seq), counter: 2)), from: testAddr("x"), now: 3.1)
    #expect(c.swim.probe == nil, "x's ack answered the probe")
}

@Test func onceALinkExistsItsMembersSessionKeyedDatagramsAreRefusedAndItsLinkKeyedOnesCarryFullAuthority() {
    var c = core()
    let serial = c.datagramKeys.install(PairDatagramKeys(seed: [1]).reversed, for: x.id, current: true, now: 1)
    #expect(datagrams(c.receiveDatagram(sessionKeyed(swim(x.id, .ping(seq: 1, target: me.id))), from: testAddr("x"), now: 2)).isEmpty)
    #expect(c.refusals[.unauthenticatedDatagram] == 1)
    // Link-keyed: the ping is answered link-keyed, and gossip is applied.
    let ping = c.receiveDatagram(OpenedDatagram(swim(x.id, .ping(seq: 2, target: me.id), gossip: [suspicion(of: y, by: x)]), form: .link(serial: serial)), from: testAddr("x"), now: 2)
    #expect(datagrams(ping).map(\.2) == [.link(x.id, serial: serial)])
    #expect(c.swim.members[y.id]?.state == .suspect)
    // A counter far ahead is refused and moves nothing; the next honest counter is taken.
    let jump = OpenedDatagram(swim(x.id, .gossip, counter: 2 + ReplayWindow.maximumJump), form: .link(serial: serial))
    #expect(c.receiveDatagram(jump, from: testAddr("x"), now: 2) == [.refused(.counterJump)])
    #expect(c.refusals[.counterJump] == 1)
    let next = OpenedDatagram(swim(x.id, .ping(seq: 3, target: me.id), counter: 2), form: .link(serial: serial))
    #expect(datagrams(c.receiveDatagram(next, from: testAddr("x"), now: 2)).count == 1)
}

@Test func whatThisMemberSendsIsLinkKeyedWhereItHoldsKeysAndOtherwiseOnlyABarePingOrAck() throws {
    var c = core()
    let serial = c.datagramKeys.install(PairDatagramKeys(seed: [1]), for: x.id, current: true, now: 1)
    let gossip = SWIMMessage(sender: me.id, kind: .gossip, gossip: [.suspect(y.id, incarnation: 0, from: me.id)])
    #expect(c.datagram(gossip, to: testAddr("x")) == .sendDatagram(DatagramPayload(sender: me.id, counter: 1, content: .swim(gossip)), to: testAddr("x"), sealing: .link(x.id, serial: serial)))
    #expect(c.datagram(gossip, to: testAddr("y")) == nil, "gossip never goes under the session key")
    #expect(c.datagram(SWIMMessage(sender: me.id, kind: .nack(seq: 1)), to: testAddr("y")) == nil)
    #expect(c.datagram(SWIMMessage(sender: me.id, kind: .pingReq(seq: 1, target: x.id, targetAddr: testAddr("x"))), to: testAddr("y")) == nil)
    let ping = SWIMMessage(sender: me.id, kind: .ping(seq: 4, target: y.id), gossip: gossip.gossip)
    #expect(c.datagram(ping, to: testAddr("y")) == .sendDatagram(DatagramPayload(sender: me.id, counter: 1, content: .swim(SWIMMessage(sender: me.id, kind: .ping(seq: 4, target: y.id)))), to: testAddr("y"), sealing: .session), "bare")
    // A ping is sealed for its target, wherever it is sent; an answer to an address x's keyed datagrams came from is sealed for x.
    if case let .sendDatagram(_, _, sealing)? = c.datagram(SWIMMessage(sender: me.id, kind: .ping(seq: 5, target: x.id)), to: testAddr("elsewhere")) {
        #expect(sealing == .link(x.id, serial: serial))
    } else { Issue.record("no ping") }
    _ = c.receiveDatagram(OpenedDatagram(swim(x.id, .gossip), form: .link(serial: serial)), from: testAddr("relay", port: 7), now: 2)
    if case let .sendDatagram(_, _, sealing)? = c.datagram(SWIMMessage(sender: me.id, kind: .ack(seq: 1)), to: testAddr("relay", port: 7)) {
        #expect(sealing == .link(x.id, serial: serial))
    } else { Issue.record("no ack") }
    // Unreliable messages go only where link keys are.
    let (_, sent) = try c.send(body: [1], to: nil, reliable: false)
    #expect(datagrams(sent).map(\.2) == [.link(x.id, serial: serial)])
}

@Test func aMemberThatFailsOrLeavesLosesItsKeysAndAClosedLinksKeysExpireAfterTheGrace() {
    var c = core()
    c.installDatagramKeys(PairDatagramKeys(seed: [1]), for: x.id, current: true, now: 1)
    c.installDatagramKeys(PairDatagramKeys(seed: [2]), for: y.id, current: true, now: 1)
    _ = c.receive(SWIMMessage(sender: x.id, kind: .gossip, gossip: [.left(x.id, incarnation: 0, signature: identity(x.id.raw).sign(MembershipStatement.left(x.id, incarnation: 0)))]), from: testAddr("x"), now: 2)
    #expect(!c.datagramKeys.has(x.id))
    _ = c.linkDown(y.id, settled: false, now: 3)
    #expect(c.datagramKeys.has(y.id) && c.nextDeadline <= 3 + DatagramKeyring.grace)
    _ = c.tick(now: 3 + DatagramKeyring.grace)
    #expect(!c.datagramKeys.has(y.id))
    c.installDatagramKeys(PairDatagramKeys(seed: [3]), for: me.id, current: true, now: 9)
    #expect(!c.datagramKeys.has(me.id), "never keys for oneself")
}

@Test func aSessionKeyedAckCompletesARelayOnlyFromItsTarget() {
    var c = core()
    let requester = c.datagramKeys.install(PairDatagramKeys(seed: [1]).reversed, for: x.id, current: true, now: 1)
    // x asks me to probe y (no link to y): my ping to y goes in the session form.
    let asked = c.receiveDatagram(OpenedDatagram(swim(x.id, .pingReq(seq: 70, target: y.id, targetAddr: testAddr("y"))), form: .link(serial: requester)), from: testAddr("x"), now: 2)
    guard let (payload, _, sealing) = datagrams(asked).first, case let .swim(m) = payload.content, case let .ping(seq, _) = m.kind else {
        Issue.record("no relayed ping: \(asked)"); return
    }
    #expect(sealing == .session)
    // A key holder claiming another id cannot complete it; y's ack is relayed to x, link-keyed.
    #expect(datagrams(c.receiveDatagram(sessionKeyed(swim(MemberID(raw: 0xBAD), .ack(seq: seq))), from: testAddr("z"), now: 2.1)).isEmpty)
    let relayed = datagrams(c.receiveDatagram(sessionKeyed(swim(y.id, .ack(seq: seq))), from: testAddr("y"), now: 2.1))
    #expect(relayed.map(\.1) == [testAddr("x")] && relayed.map(\.2) == [.link(x.id, serial: requester)])
}
