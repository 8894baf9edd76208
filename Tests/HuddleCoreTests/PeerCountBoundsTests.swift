import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 20, item 1 (first part): counts a peer sends — seqs, counters, incarnations, Lamport
/// times — are refused above 2^53 − 1 by every decoder, and the cores do their arithmetic at that
/// bound without trapping. (`UInt64.max` in one sealed datagram used to crash a node.)
private let top = WireReader.maximumCount
private let a = MemberID(raw: 1), b = MemberID(raw: 2)

/// Decodes `make(value)` for a value at the bound and one past it: the first must decode, the second must not.
private func boundHolds<T>(_ what: String, _ make: (UInt64) -> [UInt8], _ decode: ([UInt8]) throws -> T) {
    #expect((try? decode(make(top))) != nil, "\(what) at 2^53 - 1 must decode")
    #expect((try? decode(make(top + 1))) == nil, "\(what) at 2^53 must be refused")
    #expect((try? decode(make(.max))) == nil, "\(what) at UInt64.max must be refused")
}

private func message(seq: UInt64 = 1, counter: UInt64 = 1, dep: UInt64 = 1) -> WireMessage {
    WireMessage(from: a, counter: counter, seq: seq, deps: [.init(member: b, seq: dep)], to: nil, body: [1])
}

@Test func everyDecoderRefusesACountAbove2To53() {
    boundHolds("hello seq", { LinkMessage.hello(since: $0).encoded() }, LinkMessage.decode)
    boundHolds("repair request from", { LinkMessage.request(origin: a, from: $0, to: 1).encoded() }, LinkMessage.decode)
    boundHolds("repair request to", { LinkMessage.request(origin: a, from: 1, to: $0).encoded() }, LinkMessage.decode)
    boundHolds("baseline clock", { LinkMessage.baseline([a: $0]).encoded() }, LinkMessage.decode)
    boundHolds("digest clock", { LinkMessage.digest(.init(delivered: [a: $0], storedFrom: [:]), activity: nil).encoded() }, LinkMessage.decode)
    boundHolds("digest activity stamp", { LinkMessage.digest(.init(delivered: [:], storedFrom: [:]), activity: ActivityStamp(lamport: $0, member: a)).encoded() }, LinkMessage.decode)
    let identity = Identity.generate()
    boundHolds("activity lamport", { LinkMessage.activity(ActivityRecord.make(lamport: $0, setBy: a, value: [1], identity: identity)).encoded() }, LinkMessage.decode)
    let gossip: [(String, (UInt64) -> SWIMGossip)] = [
        ("suspect", { .suspect(a, incarnation: $0, from: b) }), ("failed", { .failed(a, incarnation: $0, from: b) }),
        ("left", { .left(a, incarnation: $0) }),
        ("alive", { .alive(MemberInfo(id: a, node: [UInt8](repeating: 1, count: 32), name: "a", addr: "h:1", incarnation: $0)) }),
    ]
    for (name, make) in gossip {
        boundHolds("\(name) incarnation", { SWIMMessage(sender: b, kind: .gossip, gossip: [make($0)]).encode() }, SWIMMessage.decode)
    }
    boundHolds("push-pull incarnation", { incarnation in
        SWIMPushPull(join: false, members: [MemberInfo(id: a, node: [UInt8](repeating: 1, count: 32), name: "a", addr: "h:1", incarnation: incarnation)]).encode()
    }, SWIMPushPull.decode)
    boundHolds("datagram counter", { DatagramPayload(sender: a, counter: $0, content: .swim(SWIMMessage(sender: a, kind: .ack(seq: 1)))).encoded() }, DatagramPayload.decode)
    boundHolds("message seq", { DatagramPayload(sender: a, counter: 1, content: .message(message(seq: $0))).encoded() }, DatagramPayload.decode)
    boundHolds("message counter", { DatagramPayload(sender: a, counter: 1, content: .message(message(counter: $0))).encoded() }, DatagramPayload.decode)
    boundHolds("dependency seq", { DatagramPayload(sender: a, counter: 1, content: .message(message(dep: $0))).encoded() }, DatagramPayload.decode)
}

@Test func theCoresComputeAtTheBoundWithoutTrapping() {
    // Membership: a suspicion of ourselves at the highest incarnation is refuted (incarnation + 1).
    let me = MemberInfo(id: a, node: [UInt8](repeating: 1, count: 32), name: "a", addr: "h:1")
    var swim = SWIMInstance(local: me, settings: .lan, seed: 1)
    _ = swim.receive(SWIMMessage(sender: b, kind: .gossip, gossip: [.suspect(a, incarnation: top, from: b)]), from: "h:2", now: 1)
    #expect(swim.local.incarnation == top + 1)

    // Broadcast: a hello, digest and repair request at the bound.
    var broadcast = CausalBroadcast(local: a, awaitingBaseline: false)
    _ = broadcast.setMembers([a, b])
    _ = broadcast.linkHello(origin: b, seq: top)
    let digest = broadcast.digest()
    #expect(digest.storedFrom[b] == top + 1)
    _ = broadcast.receiveDigest(.init(delivered: [b: top], storedFrom: [b: top]), from: b, now: 10)
    #expect(broadcast.stored(origin: b, from: top - 1, to: top).isEmpty)
    #expect(broadcast.stored(origin: a, from: top, to: top).isEmpty)

    // Activity: a record at the bound, then a set made here.
    var activity = ActivityRegister()
    _ = activity.apply(ActivityRecord.make(lamport: top, setBy: b, value: [1], identity: .generate()))
    #expect(activity.nextLamport() == top + 1)
}
