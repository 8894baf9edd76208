import HuddleCrypto
import Testing
@testable import HuddleCore

// Directed messages across a link that closes and forms again (issue 36: the reach benchmark's
// directed messages over a relayed link stopped arriving once the relay closed the circuit). The
// sender keeps its directed messages until the recipient acknowledges them and sends the rest
// again, in order, when a link to it comes up; the recipient delivers each once.

private func member(_ n: UInt8, _ name: String) -> (Identity, MemberInfo) {
    let identity = Identity(seed: [UInt8](repeating: n, count: 32))
    return (identity, MemberInfo(id: MemberID(raw: UInt64(n)), node: identity.publicKey, name: name, addr: testAddr(name)).signed(by: identity))
}

private let (aIdentity, aInfo) = member(51, "a")
private let (bIdentity, bInfo) = member(52, "b")

private func core(_ info: MemberInfo, _ identity: Identity, knowing others: [MemberInfo]) -> SessionCore {
    var c = SessionCore(local: info, identity: identity, joining: false, swimSeed: info.id.raw, journalSeed: info.id.raw)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: others), from: testAddr("seed"), now: 1)
    return c
}

/// What `effects` send to `peer` over its link, in order.
private func linkMessages(_ effects: [SessionEffect], to peer: MemberID) -> [LinkMessage] {
    effects.compactMap { effect in
        switch effect {
        case let .sendLink(to, message) where to == peer: message
        case let .sendToLinks(message): message
        default: nil
        }
    }
}

/// The link-up at `x` of a link to `y`: the messages it sends to `y` (hello first).
private func linkUp(_ x: inout SessionCore, to y: MemberInfo, n: UInt8, now: Double) -> [LinkMessage] {
    let candidate = LinkCandidate(peer: y, nodeKey: y.node, keyHead: x.epochs.head, datagramKeys: PairDatagramKeys(seed: [UInt8](repeating: n, count: 32)),
                                  dialer: aInfo.id, remote: y.addr, local: x.swim.local.addr)
    guard case let .admitted(_, before, hello, after) = x.linkEstablished(candidate, now: now) else {
        Issue.record("the link to \(y.name) is not admitted")
        return []
    }
    return [hello] + linkMessages(before + after, to: y.id)
}

/// `messages` received by `x` from `from`: the bodies `x` delivers, in order.
private func receive(_ x: inout SessionCore, _ messages: [LinkMessage], from: MemberInfo, now: Double) -> [[UInt8]] {
    messages.flatMap { x.receiveLink($0, from: from.id, addr: from.addr, now: now) }.compactMap { effect in
        if case let .deliver(signed) = effect { signed.message.body } else { nil }
    }
}

@Test func directedMessagesLostWithALinkAreSentAgainOnTheNextOneAndDeliveredOnceInOrder() throws {
    var a = core(aInfo, aIdentity, knowing: [bInfo])
    var b = core(bInfo, bIdentity, knowing: [aInfo])
    let ab = linkUp(&a, to: bInfo, n: 1, now: 2)
    let ba = linkUp(&b, to: aInfo, n: 1, now: 2)
    _ = receive(&a, ba, from: bInfo, now: 2)
    #expect(receive(&b, ab, from: aInfo, now: 2).isEmpty)

    func send(_ bodies: Range<UInt8>) throws -> [LinkMessage] {
        for i in bodies { _ = try a.send(body: [i], to: [bInfo.id], reliable: true) }
        return linkMessages(a.flushBatch(), to: bInfo.id)
    }
    // 0–2 arrive; 3–5 are queued on the link when it closes (lost); 6–7 are made while no link is up.
    var delivered = receive(&b, try send(0..<3), from: aInfo, now: 3)
    #expect(delivered == [[0], [1], [2]])
    _ = try send(3..<6)
    _ = a.linkDown(bInfo.id, settled: false, now: 4)
    _ = b.linkDown(aInfo.id, settled: false, now: 4)
    #expect(try send(6..<8).isEmpty, "no link: nothing goes out")
    #expect(a.broadcast.directedOut.count(for: bInfo.id) == 8, "nothing acknowledged yet: all kept")
    #expect(a.broadcast.directedOut.bytes > 0)

    // The next link: a sends every one not acknowledged again, in order; b delivers those it lacks, once.
    let again = linkUp(&a, to: bInfo, n: 2, now: 5)
    _ = receive(&a, linkUp(&b, to: aInfo, n: 2, now: 5), from: bInfo, now: 5)
    delivered += receive(&b, again, from: aInfo, now: 5)
    #expect(delivered == (0..<8).map { [$0] }, "every directed message once, in the order sent: \(delivered)")
    // Sent once more (another link-up before the acknowledgement): nothing is delivered twice.
    #expect(receive(&b, a.broadcast.directedOut.unacknowledged(for: bInfo.id).map(LinkMessage.message), from: aInfo, now: 5).isEmpty)

    // b acknowledges on its next journal tick; a drops what it kept.
    let acks = linkMessages(b.tick(now: 6), to: aInfo.id).filter { if case .directedAck = $0 { true } else { false } }
    #expect(acks.count == 1)
    _ = receive(&a, acks, from: bInfo, now: 6)
    #expect(a.broadcast.directedOut.count(for: bInfo.id) == 0 && a.broadcast.directedOut.bytes == 0)
    #expect(linkMessages(b.tick(now: 7), to: aInfo.id).allSatisfy { if case .directedAck = $0 { false } else { true } }, "acknowledged once")
}

@Test func directedMessagesWaitingForAcknowledgementMakeSendsWaitAndAnAckOnlyDropsItsSendersOwn() {
    var out = DirectedOutbox()
    let (identity, info) = member(53, "c")
    let messages = (1...4).map { i in
        MessageBatch.sign([WireMessage(origin: info.id, counter: UInt64(i), seq: 0, to: [aInfo.id, bInfo.id], body: [UInt8(i)])], identity: identity)[0]
    }
    for m in messages { out.keep(m, for: [aInfo.id, bInfo.id, aInfo.id], size: 100) }
    #expect(out.bytes == 800, "each recipient's copy counts once")
    out.acknowledged(by: aInfo.id, through: 3)
    #expect(out.count(for: aInfo.id) == 1 && out.count(for: bInfo.id) == 4 && out.bytes == 500)
    out.acknowledged(by: aInfo.id, through: 2)
    #expect(out.bytes == 500, "an old acknowledgement changes nothing")
    out.keepOnly([aInfo.id])
    #expect(out.count(for: bInfo.id) == 0 && out.bytes == 100 && out.dropped == 4)
    #expect(out.unacknowledged(for: aInfo.id).map(\.message.counter) == [4])
}

@Test func directedMessagesWaitingForAcknowledgementStopSendsAtTheirOwnBoundWellUnderTheStores() throws {
    var a = core(aInfo, aIdentity, knowing: [bInfo])
    var b = core(bInfo, bIdentity, knowing: [aInfo])
    let ab = linkUp(&a, to: bInfo, n: 3, now: 2)
    _ = receive(&a, linkUp(&b, to: aInfo, n: 3, now: 2), from: bInfo, now: 2)
    _ = receive(&b, ab, from: aInfo, now: 2)

    // 16 KiB directed messages that b does not acknowledge yet: a's sends wait (busy) at
    // `DirectedOutbox.limitBytes`, half the store's bound, with nothing stored for repair.
    let body = [UInt8](repeating: 7, count: 16 << 10)
    var sent: [LinkMessage] = []
    var refusal: CoreError?
    for _ in 0..<2048 {
        do throws(CoreError) {
            _ = try a.send(body: body, to: [bInfo.id], reliable: true)
            sent += linkMessages(a.flushBatch(), to: bInfo.id)
        } catch {
            refusal = error
            break
        }
    }
    #expect(refusal == .busy(storedBytes: 0), "sends wait: \(String(describing: refusal))")
    let kept = a.broadcast.directedOut.bytes
    #expect(kept >= DirectedOutbox.limitBytes && kept < DirectedOutbox.limitBytes + body.count + 128)
    #expect(DirectedOutbox.limitBytes * 2 <= CausalBroadcast.Settings().storeLimitBytes)

    // b delivers them and acknowledges on its next journal tick: a may send again.
    #expect(receive(&b, sent, from: aInfo, now: 3).count == a.broadcast.directedOut.count(for: bInfo.id))
    let acks = linkMessages(b.tick(now: 4), to: aInfo.id).filter { if case .directedAck = $0 { true } else { false } }
    let effects = acks.flatMap { a.receiveLink($0, from: bInfo.id, addr: bInfo.addr, now: 4) }
    #expect(effects.contains { if case .congestionCleared = $0 { true } else { false } }, "the wait ends with the acknowledgement")
    #expect(a.broadcast.directedOut.bytes == 0)
    _ = try a.send(body: body, to: [bInfo.id], reliable: true)
}
