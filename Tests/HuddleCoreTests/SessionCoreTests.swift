import HuddleCrypto
import Testing
@testable import HuddleCore

/// Pure tests of the rules `SessionCore` joins the cores with, with injected time.
/// Member `raw`'s record, signed by its own node key (seeded by `raw`), as it would present itself.
private func info(_ raw: UInt64, _ name: String, incarnation: UInt64 = 0, state: MemberState = .alive) -> MemberInfo {
    let identity = Identity(seed: [UInt8](repeating: UInt8(raw), count: 32))
    var record = MemberInfo(id: MemberID(raw: raw), node: identity.publicKey, name: name, addr: testAddr(name), incarnation: incarnation).signed(by: identity)
    record.state = state
    return record
}

private let me = info(5, "me")

private func core(joining: Bool = false) -> SessionCore {
    SessionCore(local: me, identity: Identity(seed: [UInt8](repeating: 5, count: 32)), joining: joining, swimSeed: 1, journalSeed: 1)
}

private func dials(_ effects: [SessionEffect]) -> [String] { effects.compactMap { if case let .dial(a, _) = $0 { a } else { nil } } }
private func closes(_ effects: [SessionEffect]) -> [MemberID] { effects.compactMap { if case let .closeLink(m) = $0 { m } else { nil } } }
private func changes(_ effects: [SessionEffect]) -> [MemberChange] { effects.compactMap { if case let .member(c, _) = $0 { c } else { nil } } }

@Test func aMemberThatJoinsIsLiveForEveryCoreAndTheLowerIdDialsAtOnce() {
    var c = core()
    _ = c.broadcast.makeBroadcast(body: [1])  // one broadcast before anyone else is known
    let lower = info(2, "lower"), higher = info(9, "higher")
    let effects = c.receivePushPull(SWIMPushPull(join: false, members: [lower, higher]), from: testAddr("lower"), now: 1)
    #expect(changes(effects) == [.joined, .joined])
    #expect(c.live == [me.id, lower.id, higher.id])
    #expect(dials(effects) == [testAddr("higher")], "me (5) dials the higher member at once; the lower one dials me")
    // Broadcast counts them from the seq at which they became known: the hello names it.
    #expect(c.linkUp(higher.id) == .hello(since: 1, nonApplication: 0))
    _ = c.broadcast.makeBroadcast(body: [2])
    #expect(c.linkUp(lower.id) == .hello(since: 1, nonApplication: 0), "the hello names the seq from when lower became known, not the seq now")
    // The journal hands off to them.
    #expect(c.journal.handOffPlan(to: Array(c.live.subtracting([me.id]))).plan.isEmpty)
}

@Test func aMemberThatLeavesIsClosedAndNoLongerDialed() {
    var c = core()
    let peer = info(9, "peer")
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [peer]), from: testAddr("peer"), now: 1)
    let left = c.receive(SWIMMessage(sender: peer.id, kind: .gossip, gossip: [.left(peer.id, incarnation: 0, signature: Identity(seed: [UInt8](repeating: 9, count: 32)).sign(MembershipStatement.left(peer.id, incarnation: 0)))]), from: testAddr("peer"), now: 2)
    #expect(changes(left) == [.left] && closes(left) == [peer.id])
    #expect(!c.isLive(peer.id) && c.live == [me.id])
    #expect(dials(c.tick(now: 10)).isEmpty, "a member that left is not dialed again")
}

@Test func aSettledLinkLossSuspectsThePeerAndAnEarlyOneDoesNot() {
    var c = core()
    let peer = info(9, "peer")
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [peer]), from: testAddr("peer"), now: 1)
    _ = c.linkUp(peer.id)
    // (Each also changes the peer's path: ReachTests.)
    #expect(changes(c.linkDown(peer.id, settled: false, now: 2)).filter { $0 != .path }.isEmpty)
    #expect(c.swim.members[peer.id]?.state == .alive)
    #expect(changes(c.linkDown(peer.id, settled: true, now: 3)).filter { $0 != .path } == [.suspect])
    #expect(c.isLive(peer.id), "a suspect still counts as live for broadcast and the journal")
}

@Test func aJoinerDeliversNothingBeforeItsBaselineThenEverythingAfterIt() {
    var c = core(joining: true)
    let origin = MemberID(raw: 9)
    _ = c.linkHello(from: origin, since: 0, nonApplication: 0, now: 1)
    let m = SignedMessage(message: WireMessage(origin: origin, counter: 1, seq: 3, to: nil, body: [1]),
                          proof: BatchProof(signature: [UInt8](repeating: 0, count: 64), index: 0, count: 1, path: []))
    #expect(c.receive(verified: m, now: 1).isEmpty, "held until the sponsor's baseline arrives")
    let released = c.adoptBaseline([origin: 2], nonApplication: [:], now: 1)
    #expect(released.count == 1)
    if case let .deliver(signed)? = released.first { #expect(signed.message.seq == 3) } else { Issue.record("no delivery: \(released)") }
}

private func digests(_ effects: [SessionEffect]) -> Int {
    effects.filter { if case .sendToLinks(.digest) = $0 { true } else { false } }.count
}

@Test func digestsGoToTheLinksEveryTenthOfASecondAndTheDeadlineSaysWhen() {
    var c = core()
    #expect(digests(c.tick(now: 1)) == 0, "no link, no digest")
    #expect(c.nextDeadline <= 1 + SessionCore.journalInterval)
    let peer = info(9, "peer")
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [peer]), from: testAddr("peer"), now: 1)
    _ = c.linkUp(peer.id)
    #expect(digests(c.tick(now: 1.01)) == 1)
    #expect(digests(c.tick(now: 1.05)) == 0)
    #expect(c.nextDeadline <= 1.01 + SessionCore.digestInterval)
    #expect(digests(c.tick(now: 1.111)) == 0, "nothing changed: no digest before digestRefresh")
    // A new link gets the current digest at once; a change goes to every link at the next interval.
    let other = info(11, "other")
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [other]), from: testAddr("other"), now: 1.2)
    _ = c.linkUp(other.id)
    let toNew = c.tick(now: 1.25)
    #expect(toNew.contains { if case .sendLink(other.id, .digest) = $0 { true } else { false } } && digests(toNew) == 0)
    _ = c.broadcast.makeBroadcast(body: [1])
    #expect(digests(c.tick(now: 1.36)) == 1, "a changed digest goes out at the next interval")
    #expect(digests(c.tick(now: 1.47)) == 0)
    #expect(digests(c.tick(now: 2.37)) == 1, "an unchanged one every digestRefresh")
}

@Test func aPeerBehindOnTheActivityIsSentTheCurrentRecord() {
    var c = core()
    let peer = info(9, "peer")
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [peer]), from: testAddr("peer"), now: 1)
    let empty = CausalBroadcast.Digest(delivered: [:], storedFrom: [:])
    #expect(c.receiveDigest(empty, activity: nil, from: peer.id, now: 2).isEmpty, "nothing to send without a value")
    let record = ActivityRecord.make(lamport: c.activity.nextLamport(wallClock: 0), setBy: me.id, value: [1], identity: .generate())
    _ = c.activity.apply(record)
    let behind = c.receiveDigest(empty, activity: ActivityStamp(lamport: 0, member: peer.id), from: peer.id, now: 3)
    #expect(behind == [.sendLink(peer.id, .activity(record))])
    #expect(c.receiveDigest(empty, activity: record.stamp, from: peer.id, now: 4).isEmpty, "a peer that has it hears nothing")
}

/// Issue 33, item 4: a digest is 26 bytes and the record it asks for up to 64 KiB. A peer whose
/// digests keep showing an older value is sent the record once per `activityResend`, not at every
/// digest (a member that sent digests and never read took a node from 46 MB to 811 MB in 24 s).
@Test func aPeerThatStaysBehindOnTheActivityIsSentTheRecordOncePerResendInterval() {
    var c = core()
    let peer = info(9, "peer")
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [peer]), from: testAddr("peer"), now: 1)
    let record = ActivityRecord.make(lamport: c.activity.nextLamport(wallClock: 0), setBy: me.id, value: [UInt8](repeating: 1, count: 60_000), identity: .generate())
    _ = c.activity.apply(record)
    let empty = CausalBroadcast.Digest(delivered: [:], storedFrom: [:])
    var sent = 0
    // 1,000 digests in 10 s, all behind.
    for i in 0..<1_000 {
        sent += c.receiveDigest(empty, activity: nil, from: peer.id, now: 2 + Double(i) * 0.01).count
    }
    #expect(sent == 5, "once, then once every \(SessionCore.activityResend) s: \(sent)")
    // A new value goes out at once, whatever was sent before.
    let next = ActivityRecord.make(lamport: c.activity.nextLamport(wallClock: 0), setBy: me.id, value: [2], identity: .generate())
    _ = c.activity.apply(next)
    #expect(c.receiveDigest(empty, activity: record.stamp, from: peer.id, now: 12.005) == [.sendLink(peer.id, .activity(next))])
    // A link that went down and came back is sent it again.
    _ = c.linkDown(peer.id, settled: false, now: 12.01)
    #expect(c.receiveDigest(empty, activity: record.stamp, from: peer.id, now: 12.02) == [.sendLink(peer.id, .activity(next))])
}

@Test func aJoinersPushPullIsAnsweredWithItsCatchUpThenTheMergedState() {
    var c = core()
    let record = ActivityRecord.make(lamport: c.activity.nextLamport(wallClock: 0), setBy: me.id, value: [1], identity: .generate())
    _ = c.activity.apply(record)
    let joiner = info(9, "joiner")
    let effects = c.linkPushPull(SWIMPushPull(join: true, members: [joiner]), from: joiner.id, addr: testAddr("joiner"), now: 1)
    let sent = effects.compactMap { if case let .sendLink(peer, message) = $0, peer == joiner.id { message } else { nil } }
    #expect(sent.count == 3, "baseline, activity, reply (no journal entries yet): \(sent)")
    #expect(sent.first == .baseline(c.broadcast.delivered, nonApplication: [me.id: 0]))
    #expect(sent.dropFirst().first == .activity(record))
    if case let .pushPullReply(reply)? = sent.last {
        #expect(reply.members.contains { $0.id == joiner.id }, "the reply is the state after merging the joiner")
    } else { Issue.record("no reply: \(sent)") }
    #expect(changes(effects) == [.joined])
    // A push-pull that is not a join gets only the reply.
    let again = c.linkPushPull(SWIMPushPull(join: false, members: [joiner]), from: joiner.id, addr: testAddr("joiner"), now: 2)
    #expect(again.filter { if case .sendLink = $0 { true } else { false } }.count == 1)
}

@Test func datagramsAreReplayCheckedAndUnreliableMessagesTakenOnlyFromTheirLiveOrigin() {
    var c = core()
    let peer = info(9, "peer")
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [peer]), from: testAddr("peer"), now: 1)
    c.installDatagramKeys(PairDatagramKeys(seed: [9]), for: peer.id, current: true, now: 1)
    func keyed(_ sender: MemberID, _ counter: UInt64, _ m: WireMessage, serial: UInt64 = 1) -> OpenedDatagram {
        OpenedDatagram(DatagramPayload(sender: sender, counter: counter, content: .message(m)), form: .link(serial: serial))
    }
    let mine = WireMessage(origin: peer.id, counter: 1, seq: 0, to: nil, body: [1])
    #expect(c.receiveDatagram(keyed(peer.id, 1, mine), from: testAddr("peer"), now: 2) == [.deliverUnreliable(mine)])
    #expect(c.receiveDatagram(keyed(peer.id, 1, mine), from: testAddr("peer"), now: 2) == [.refused(.replayedDatagram)], "a replay")
    #expect(c.receiveDatagram(keyed(peer.id, 1, mine), from: testAddr("peer"), now: 2).isEmpty, "counted, reported once")
    #expect(c.refusals[.replayedDatagram] == 2)
    let spoofed = WireMessage(origin: MemberID(raw: 77), counter: 2, seq: 0, to: nil, body: [1])
    #expect(c.receiveDatagram(keyed(peer.id, 2, spoofed), from: testAddr("peer"), now: 2).isEmpty)
    let forSomeoneElse = WireMessage(origin: peer.id, counter: 3, seq: 0, to: [MemberID(raw: 77)], body: [1])
    #expect(c.receiveDatagram(keyed(peer.id, 3, forSomeoneElse), from: testAddr("peer"), now: 2).isEmpty)
    let stranger = WireMessage(origin: MemberID(raw: 78), counter: 1, seq: 0, to: nil, body: [1])
    c.installDatagramKeys(PairDatagramKeys(seed: [78]), for: stranger.origin, current: true, now: 1)
    #expect(c.receiveDatagram(keyed(stranger.origin, 1, stranger, serial: 2), from: testAddr("x"), now: 2).isEmpty, "not a live member")
    // Under the session key, the same message is refused even from its live origin.
    let unkeyed = info(10, "unkeyed")
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [unkeyed]), from: testAddr("unkeyed"), now: 1)
    let plain = WireMessage(origin: unkeyed.id, counter: 1, seq: 0, to: nil, body: [1])
    let session = OpenedDatagram(DatagramPayload(sender: unkeyed.id, counter: 1, content: .message(plain)), form: .session)
    #expect(c.receiveDatagram(session, from: testAddr("unkeyed"), now: 2) == [.refused(.unauthenticatedDatagram)])
}

@Test func theSponsorPassesAJoinersSignedRecordOnOverEveryLinkOnce() {
    var c = core()
    let joiner = info(9, "joiner")
    func forwarded(_ effects: [SessionEffect]) -> [MemberInfo] {
        effects.flatMap { effect -> [MemberInfo] in
            guard case let .sendToLinks(.swim(message)) = effect else { return [] }
            return message.gossip.compactMap { if case let .alive(record) = $0 { record } else { nil } }
        }
    }
    let first = c.linkPushPull(SWIMPushPull(join: true, members: [joiner]), from: joiner.id, addr: testAddr("joiner"), now: 1)
    #expect(forwarded(first) == [joiner], "the record as the joiner signed it")
    let again = c.linkPushPull(SWIMPushPull(join: true, members: [joiner]), from: joiner.id, addr: testAddr("joiner"), now: 2)
    #expect(forwarded(again).isEmpty, "once per member, however many push-pulls")
}
