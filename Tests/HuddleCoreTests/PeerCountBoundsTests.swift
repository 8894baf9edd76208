import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 20, item 1 (first part): counts a peer sends — seqs, counters, incarnations, Lamport
/// times — are refused above 2^53 − 1 by every decoder, and the cores do their arithmetic at that
/// bound without trapping. (`UInt64.max` in one sealed datagram used to crash a node.)
private let top = WireReader.maximumCount
private let a = MemberID(raw: 1), b = MemberID(raw: 2)

/// Decodes `make(value)` for a value at the bound (`limit`) and one past it: the first must
/// decode, the second must not.
private func boundHolds<T>(_ what: String, limit: UInt64 = top, _ make: (UInt64) -> [UInt8], _ decode: ([UInt8]) throws -> T) {
    #expect((try? decode(make(limit))) != nil, "\(what) at \(limit) must decode")
    #expect((try? decode(make(limit + 1))) == nil, "\(what) at \(limit + 1) must be refused")
    #expect((try? decode(make(.max))) == nil, "\(what) at UInt64.max must be refused")
}

private func message(seq: UInt64 = 1, counter: UInt64 = 1, dep: UInt64 = 1) -> WireMessage {
    WireMessage(from: a, counter: counter, seq: seq, deps: [.init(member: b, seq: dep)], to: nil, body: [1])
}

@Test func everyDecoderRefusesACountAbove2To53() {
    boundHolds("hello seq", { LinkMessage.hello(since: $0, nonApplication: 0).encoded() }, LinkMessage.decode)
    boundHolds("hello count", { LinkMessage.hello(since: 1, nonApplication: $0).encoded() }, LinkMessage.decode)
    boundHolds("repair request from", { LinkMessage.request(origin: a, from: $0, to: 1).encoded() }, LinkMessage.decode)
    boundHolds("repair request to", { LinkMessage.request(origin: a, from: 1, to: $0).encoded() }, LinkMessage.decode)
    boundHolds("baseline clock", { LinkMessage.baseline([a: $0], nonApplication: [:]).encoded() }, LinkMessage.decode)
    boundHolds("baseline counts", { LinkMessage.baseline([:], nonApplication: [a: $0]).encoded() }, LinkMessage.decode)
    boundHolds("digest clock", { LinkMessage.digest(.init(delivered: [a: $0], storedFrom: [:]), activity: nil).encoded() }, LinkMessage.decode)
    boundHolds("digest activity stamp", limit: top - 1, { LinkMessage.digest(.init(delivered: [:], storedFrom: [:]), activity: ActivityStamp(lamport: $0, member: a)).encoded() }, LinkMessage.decode)
    let identity = Identity.generate()
    boundHolds("activity lamport", limit: top - 1, { LinkMessage.activity(ActivityRecord.make(lamport: $0, setBy: a, value: [1], identity: identity)).encoded() }, LinkMessage.decode)
    // A suspicion must leave its subject one incarnation to refute it with.
    let gossip: [(String, UInt64, (UInt64) -> SWIMGossip)] = [
        ("suspect", top - 1, { .suspect(a, incarnation: $0, from: b) }), ("failed", top - 1, { .failed(a, incarnation: $0, from: b) }),
        ("left", top, { .left(a, incarnation: $0) }),
        ("alive", top, { .alive(MemberInfo(id: a, node: [UInt8](repeating: 1, count: 32), name: "a", addr: testAddr("h"), incarnation: $0)) }),
    ]
    for (name, limit, make) in gossip {
        boundHolds("\(name) incarnation", limit: limit, { SWIMMessage(sender: b, kind: .gossip, gossip: [make($0)]).encode() }, SWIMMessage.decode)
    }
    boundHolds("push-pull suspect record incarnation", limit: top - 1, { incarnation in
        SWIMPushPull(join: false, members: [MemberInfo(id: a, node: [UInt8](repeating: 1, count: 32), name: "a", addr: testAddr("h"), state: .suspect, incarnation: incarnation)]).encode()
    }, SWIMPushPull.decode)
    boundHolds("push-pull incarnation", { incarnation in
        SWIMPushPull(join: false, members: [MemberInfo(id: a, node: [UInt8](repeating: 1, count: 32), name: "a", addr: testAddr("h"), incarnation: incarnation)]).encode()
    }, SWIMPushPull.decode)
    boundHolds("datagram counter", { DatagramPayload(sender: a, counter: $0, content: .swim(SWIMMessage(sender: a, kind: .ack(seq: 1)))).encoded() }, DatagramPayload.decode)
    boundHolds("message seq", { DatagramPayload(sender: a, counter: 1, content: .message(message(seq: $0))).encoded() }, DatagramPayload.decode)
    boundHolds("message counter", { DatagramPayload(sender: a, counter: 1, content: .message(message(counter: $0))).encoded() }, DatagramPayload.decode)
    boundHolds("dependency seq", { DatagramPayload(sender: a, counter: 1, content: .message(message(dep: $0))).encoded() }, DatagramPayload.decode)
}

@Test func theCoresComputeAtTheBoundWithoutTrapping() {
    // Membership: a suspicion of ourselves at the highest incarnation a suspicion may carry (ours,
    // since only we raise it) is refuted with the next one, which every member still decodes.
    let me = MemberInfo(id: a, node: [UInt8](repeating: 1, count: 32), name: "a", addr: testAddr("h"), incarnation: top - 1)
    var swim = SWIMInstance(local: me, settings: .lan, seed: 1, signer: UncheckedMembershipSigner(),
                            members: [MemberInfo(id: b, node: [UInt8](repeating: 2, count: 32), name: "b", addr: testAddr("h", port: 2))])
    let refutation = swim.receive(SWIMMessage(sender: b, kind: .gossip, gossip: [.suspect(a, incarnation: top - 1, from: b)]), from: testAddr("h", port: 2), now: 1)
    #expect(swim.local.incarnation == top)
    for case let .send(message, _) in refutation { #expect((try? SWIMMessage.decode(message.encode())) != nil, "the refutation must decode") }

    // Broadcast: a hello, digest and repair request at the bound.
    var broadcast = CausalBroadcast(local: a, awaitingBaseline: false)
    _ = broadcast.setMembers([a, b], now: 0)
    _ = broadcast.linkHello(origin: b, seq: top)
    let digest = broadcast.digest()
    #expect(digest.storedFrom[b] == top + 1)
    _ = broadcast.receiveDigest(.init(delivered: [b: top], storedFrom: [b: top]), from: b, now: 10)
    #expect(broadcast.stored(origin: b, from: top - 1, to: top).isEmpty)
    #expect(broadcast.stored(origin: a, from: top, to: top).isEmpty)

    // Activity: a record at the bound, then a set made here, which others still decode.
    var activity = ActivityRegister()
    _ = activity.apply(ActivityRecord.make(lamport: top - 1, setBy: b, value: [1], identity: .generate()))
    #expect(activity.nextLamport() == top)
}
