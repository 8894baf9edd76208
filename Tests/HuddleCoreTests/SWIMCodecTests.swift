import Testing
@testable import HuddleCore

private let sampleGossip: [SWIMGossip] = [
    .alive(swimInfo(2)),
    .suspect(swimID(3), incarnation: 7, from: swimID(2)),
    .failed(swimID(4), incarnation: 1, from: swimID(5)),
    .left(swimID(6), incarnation: 9),
]

private let sampleMessages: [SWIMMessage] = [
    SWIMMessage(sender: swimID(1), kind: .ping(seq: 42, target: swimID(2)), gossip: sampleGossip),
    SWIMMessage(sender: swimID(1), kind: .ack(seq: 42)),
    SWIMMessage(sender: swimID(1), kind: .pingReq(seq: 7, target: swimID(9), targetAddr: "10.0.0.9:7946"), gossip: sampleGossip),
    SWIMMessage(sender: swimID(1), kind: .nack(seq: UInt32.max)),
    SWIMMessage(sender: swimID(1), kind: .gossip, gossip: sampleGossip),
]

@Test func swimMessagesRoundTripAndSizesAreExact() throws {
    for m in sampleMessages {
        let bytes = m.encode()
        #expect(bytes.count == m.encodedSize)
        #expect(try SWIMMessage.decode(bytes) == m)
    }
}

@Test func swimPushPullRoundTrips() throws {
    var failed = swimInfo(3); failed.state = .failed; failed.incarnation = 4
    let state = SWIMPushPull(join: true, members: [swimInfo(1), swimInfo(2), failed])
    #expect(try SWIMPushPull.decode(state.encode()) == state)
    #expect(try SWIMPushPull.decode(SWIMPushPull(join: false, members: []).encode()).members.isEmpty)
}

@Test func swimEveryTruncationIsRefused() {
    for m in sampleMessages {
        let bytes = m.encode()
        for n in 0..<bytes.count { #expect(throws: CoreError.self) { try SWIMMessage.decode(Array(bytes.prefix(n))) } }
        #expect(throws: CoreError.self) { try SWIMMessage.decode(bytes + [0]) }
    }
    let state = SWIMPushPull(join: false, members: [swimInfo(1), swimInfo(2)]).encode()
    for n in 0..<state.count { #expect(throws: CoreError.self) { try SWIMPushPull.decode(Array(state.prefix(n))) } }
}

@Test func swimRandomAndMutatedBytesNeverTrap() {
    var rng = SWIMRandom(seed: 99)
    var decoded = 0, wrongVersionDecoded = 0, unstable = 0
    for round in 0..<20_000 {
        var bytes: [UInt8]
        if round % 2 == 0 {
            bytes = (0..<rng.index(200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if !bytes.isEmpty { bytes[0] = 1 }  // get past the version byte
        } else {
            bytes = sampleMessages[rng.index(sampleMessages.count)].encode()
            for _ in 0...rng.index(4) { bytes[rng.index(bytes.count)] = UInt8(truncatingIfNeeded: rng.next()) }
        }
        let message = try? SWIMMessage.decode(bytes)
        if let message {
            decoded += 1
            // Computed here from the wire form: only the version byte starts a message, and what
            // decodes encodes back to a message that decodes to the same thing.
            if bytes.first != SWIMMessage.version { wrongVersionDecoded += 1 }
            if (try? SWIMMessage.decode(message.encode()))?.encode() != message.encode() { unstable += 1 }
        }
        _ = try? SWIMPushPull.decode(bytes)
    }
    #expect(wrongVersionDecoded == 0, "\(wrongVersionDecoded) messages of another version decoded")
    #expect(unstable == 0, "\(unstable) decoded messages did not survive encode and decode")
    // Half the inputs are samples with at most 5 bytes changed: many still decode, so the fuzz
    // reaches past the header into every kind's fields (a decoder refusing all would pass the rest).
    #expect(decoded > 1_000 && decoded < 20_000, "\(decoded) decoded")
}

@Test func swimHugeCountsAreRefusedBeforeAllocating() {
    // A push-pull claiming 2^32 - 1 members in a few bytes.
    #expect(throws: CoreError.self) { try SWIMPushPull.decode([1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0]) }
    // A message claiming 255 updates with none present.
    #expect(throws: CoreError.self) { try SWIMMessage.decode([1, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 255]) }
}

@Test func swimOutgoingDatagramsStayWithinTheBudget() throws {
    // Learning 200 members queues 200 alive updates; every datagram must still fit.
    var s = SWIMInstance(local: swimInfo(1), settings: .lan, seed: 3, signer: UncheckedMembershipSigner())
    let others = (2...201).map { n -> MemberInfo in var i = swimInfo(UInt64(n)); i.name = String(repeating: "x", count: 40); return i }
    _ = s.receivePushPull(others, join: true, from: testAddr("seed"), now: 0)
    var t = 0.0
    var sentAny = false
    while t < 3 {
        for (m, _) in s.tick(now: t).sent {
            sentAny = true
            #expect(m.encode().count <= SWIMSettings.lan.maxMessageBytes)
            #expect(try SWIMMessage.decode(m.encode()) == m)
        }
        t += 0.05
    }
    #expect(sentAny)
}
