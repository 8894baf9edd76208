import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 20, item 1 (first part), and issue 33, item 1: counts a peer sends — seqs, counters,
/// incarnations, Lamport times — are refused above their limit by every decoder (2^52 for a count
/// its sender made, 2^53 − 1 for one derived from those), the cores do their arithmetic at those
/// bounds without trapping, and what they make from them decodes again. (`UInt64.max` in one
/// sealed datagram used to crash a node.)
private let top = WireReader.maximumCount
private let made = WireReader.madeCountLimit
private let a = MemberID(raw: 1), b = MemberID(raw: 2)

/// Decodes `make(value)` for a value at the bound (`limit`) and one past it: the first must
/// decode, the second must not.
private func boundHolds<T>(_ what: String, limit: UInt64 = top, _ make: (UInt64) -> [UInt8], _ decode: ([UInt8]) throws -> T) {
    #expect((try? decode(make(limit))) != nil, "\(what) at \(limit) must decode")
    #expect((try? decode(make(limit + 1))) == nil, "\(what) at \(limit + 1) must be refused")
    #expect((try? decode(make(.max))) == nil, "\(what) at UInt64.max must be refused")
}

private func message(seq: UInt64 = 1, counter: UInt64 = 1, dep: UInt64 = 1) -> WireMessage {
    WireMessage(origin: a, counter: counter, seq: seq, deps: [.init(member: b, seq: dep)], to: nil, body: [1])
}

@Test func everyDecoderRefusesACountAboveItsLimit() {
    // Counts a member claims to have made (its seqs, its incarnation, a clock a joiner adopts, an
    // activity time) stop at 2^52; counts others derive from them (the next seq to store from, a
    // repair range, a datagram counter) at 2^53 − 1, so what a core makes from one still decodes.
    boundHolds("hello seq", limit: made, { LinkMessage.hello(since: $0, nonApplication: 0).encoded() }, LinkMessage.decode)
    boundHolds("hello count", limit: made, { LinkMessage.hello(since: 1, nonApplication: $0).encoded() }, LinkMessage.decode)
    boundHolds("repair request from", { LinkMessage.request(origin: a, from: $0, to: 1).encoded() }, LinkMessage.decode)
    boundHolds("repair request to", { LinkMessage.request(origin: a, from: 1, to: $0).encoded() }, LinkMessage.decode)
    boundHolds("baseline clock", limit: made, { LinkMessage.baseline([a: $0], nonApplication: [:]).encoded() }, LinkMessage.decode)
    boundHolds("baseline counts", limit: made, { LinkMessage.baseline([:], nonApplication: [a: $0]).encoded() }, LinkMessage.decode)
    boundHolds("digest clock", { LinkMessage.digest(.init(delivered: [a: $0], storedFrom: [:]), activity: nil).encoded() }, LinkMessage.decode)
    boundHolds("digest stored-from", { LinkMessage.digest(.init(delivered: [:], storedFrom: [a: $0]), activity: nil).encoded() }, LinkMessage.decode)
    boundHolds("digest activity stamp", limit: made, { LinkMessage.digest(.init(delivered: [:], storedFrom: [:]), activity: ActivityStamp(lamport: $0, member: a)).encoded() }, LinkMessage.decode)
    let identity = Identity.generate()
    boundHolds("activity lamport", limit: made, { LinkMessage.activity(ActivityRecord.make(lamport: $0, setBy: a, value: [1], identity: identity)).encoded() }, LinkMessage.decode)
    let gossip: [(String, (UInt64) -> SWIMGossip)] = [
        ("suspect", { .suspect(a, incarnation: $0, from: b) }), ("failed", { .failed(a, incarnation: $0, from: b) }),
        ("left", { .left(a, incarnation: $0) }),
        ("alive", { .alive(MemberInfo(id: a, node: [UInt8](repeating: 1, count: 32), name: "a", addr: testAddr("h"), incarnation: $0)) }),
    ]
    for (name, make) in gossip {
        boundHolds("\(name) incarnation", limit: made, { SWIMMessage(sender: b, kind: .gossip, gossip: [make($0)]).encode() }, SWIMMessage.decode)
    }
    for state in [MemberState.alive, .suspect, .failed, .left] {
        boundHolds("push-pull \(state) record incarnation", limit: made, { incarnation in
            SWIMPushPull(join: false, members: [MemberInfo(id: a, node: [UInt8](repeating: 1, count: 32), name: "a", addr: testAddr("h"), state: state, incarnation: incarnation)]).encode()
        }, SWIMPushPull.decode)
    }
    boundHolds("datagram counter", { DatagramPayload(sender: a, counter: $0, content: .swim(SWIMMessage(sender: a, kind: .ack(seq: 1)))).encoded() }, DatagramPayload.decode)
    boundHolds("message seq", limit: made, { DatagramPayload(sender: a, counter: 1, content: .message(message(seq: $0))).encoded() }, DatagramPayload.decode)
    boundHolds("message counter", { DatagramPayload(sender: a, counter: 1, content: .message(message(counter: $0))).encoded() }, DatagramPayload.decode)
    boundHolds("dependency seq", limit: made, { DatagramPayload(sender: a, counter: 1, content: .message(message(dep: $0))).encoded() }, DatagramPayload.decode)
}

/// Issue 33, item 1: what the cores make from the largest counts a peer may send decodes again at
/// every peer. (`hello(since: 2^53 − 1)` was taken, the digest said `storedFrom` 2^53, and the others
/// dropped their link to the node 53 times in 40 s; a suspicion refuted at 2^53 − 1 was refused the
/// same way; an honest activity set after a record at 2^53 − 2 made 2^53 − 1.)
@Test func whatTheCoresMakeFromTheLargestCountsDecodesAgain() throws {
    // Membership: a suspicion of ourselves at the highest incarnation a record may carry, less
    // one (only we raise ours, one at a time), is refuted with one more, which every member decodes.
    let me = MemberInfo(id: a, node: [UInt8](repeating: 1, count: 32), name: "a", addr: testAddr("h"), incarnation: made - 1)
    var swim = SWIMInstance(local: me, settings: .lan, seed: 1, signer: UncheckedMembershipSigner(),
                            members: [MemberInfo(id: b, node: [UInt8](repeating: 2, count: 32), name: "b", addr: testAddr("h", port: 2))])
    let refutation = swim.receive(SWIMMessage(sender: b, kind: .gossip, gossip: [.suspect(a, incarnation: made - 1, from: b)]), from: testAddr("h", port: 2), now: 1)
    #expect(swim.local.incarnation == made)
    for case let .send(message, _) in refutation { #expect((try? SWIMMessage.decode(message.encode())) != nil, "the refutation must decode") }
    #expect((try? SWIMPushPull.decode(SWIMPushPull(join: false, members: [swim.local]).encode())) != nil)

    // Broadcast: a hello and a baseline at the limit, then the digest made from them.
    var broadcast = CausalBroadcast(local: a, awaitingBaseline: true)
    _ = broadcast.setMembers([a, b], now: 0)
    let hello = try LinkMessage.decode(LinkMessage.hello(since: made, nonApplication: made).encoded())
    guard case let .hello(since, _) = hello else { Issue.record("not a hello"); return }
    _ = broadcast.linkHello(origin: b, seq: since)
    _ = broadcast.adoptBaseline([MemberID(raw: 3): made])
    let digest = broadcast.digest()
    #expect(digest.storedFrom[b] == made + 1)
    #expect(try LinkMessage.decode(LinkMessage.digest(digest, activity: nil).encoded()) == .digest(digest, activity: nil))
    _ = broadcast.receiveDigest(.init(delivered: [b: top], storedFrom: [b: top]), from: b, now: 10)
    #expect(broadcast.stored(origin: b, from: top - 1, to: top).isEmpty)
    #expect(broadcast.stored(origin: a, from: top, to: top).isEmpty)

    // Activity: a record at the limit, then a set made here, which others still decode.
    var activity = ActivityRegister()
    _ = activity.apply(ActivityRecord.make(lamport: made, setBy: b, value: [1], identity: .generate()))
    let next = activity.nextLamport(wallClock: 0)
    #expect(next == made, "the clock stops at the limit rather than make a time no peer decodes")
    #expect((try? LinkMessage.decode(LinkMessage.activity(ActivityRecord.make(lamport: next, setBy: a, value: [1], identity: .generate())).encoded())) != nil)
}
