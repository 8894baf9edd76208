import Testing
@testable import HuddleCore

/// A small deterministic generator so fuzz-style tests are repeatable.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private func member(_ n: UInt64, state: MemberState = .alive) -> MemberInfo {
    MemberInfo(id: MemberID(raw: n), node: [UInt8](repeating: UInt8(n & 0xFF), count: 32), name: "node-\(n) ✓", addr: "127.0.0.1:\(7400 + n)", state: state, incarnation: n)
}

private let samples: [LinkMessage] = [
    .hello(since: 42, nonApplication: 3),
    .pushPull(SWIMPushPull(join: true, members: [member(1), member(2, state: .failed)])),
    .pushPullReply(SWIMPushPull(join: false, members: [])),
    .swim(SWIMMessage(sender: MemberID(raw: 3), kind: .ping(seq: 7, target: MemberID(raw: 4)), gossip: [.left(MemberID(raw: 5), incarnation: 2)])),
    .message(SignedMessage(message: WireMessage(origin: MemberID(raw: 7), counter: 9, seq: 3, deps: [.init(member: MemberID(raw: 1), seq: 5)], to: nil, body: Array("hi".utf8)),
                           proof: BatchProof(signature: [UInt8](repeating: 1, count: 64), index: 1, count: 3, path: [[UInt8](repeating: 2, count: 32)]))),
    .message(SignedMessage(message: WireMessage(origin: MemberID(raw: 7), counter: 10, seq: 0, kind: .activity, to: [MemberID(raw: 1), MemberID(raw: 2)], body: [UInt8](repeating: 0xAB, count: 70_000)),
                           proof: BatchProof(signature: [UInt8](repeating: 1, count: 64), index: 0, count: 1, path: []))),
    .digest(CausalBroadcast.Digest(delivered: [MemberID(raw: 1): 4], storedFrom: [MemberID(raw: 1): 2], ownNonApplication: 3), activity: ActivityStamp(lamport: 3, member: MemberID(raw: 1))),
    .digest(CausalBroadcast.Digest(delivered: [:], storedFrom: [:]), activity: nil),
    .request(origin: MemberID(raw: 4), from: 1, to: 9),
    .chunkCorrupt(id: "3f2a", index: 7),
    .baseline([MemberID(raw: 2): 8], nonApplication: [MemberID(raw: 2): 1]),
    .activity(ActivityRecord(lamport: 1, setBy: MemberID(raw: 9), value: Array("{}".utf8), signature: [UInt8](repeating: 3, count: 64))),
    .epochHead(epoch: 3, head: [UInt8](repeating: 4, count: 32), holdsKey: false),
    .timeRequest(wallMicros: 1_700_000_000_123_456),
    .timeReply(echo: 1_700_000_000_123_456, wallMicros: LinkTiming.maximumWallMicros),
    .observed(link: "203.0.113.7:40123", datagram: ""),
    .observed(link: "", datagram: "[2001:db8::1]:7400"),
    .punch(attempt: 3, step: .sync),
    .punch(attempt: 4, step: .reply, addrs: ["198.51.100.3:7400", "[2001:db8::3]:7400"]),
    .epochGrant(EpochGrant(session: [UInt8](repeating: 1, count: 8), epoch: 2, head: [UInt8](repeating: 2, count: 32),
                           recipient: [UInt8](repeating: 3, count: 32), sealedKey: [UInt8](repeating: 5, count: EpochChange.sealedKeyLength))),
    .epochChanges([EpochChange(session: [UInt8](repeating: 1, count: 8), epoch: 1, parent: [UInt8](repeating: 2, count: 32), maker: MemberID(raw: 3),
                               makerNodeKey: [UInt8](repeating: 3, count: 32), removed: [[UInt8](repeating: 9, count: 32)], keyCheck: [UInt8](repeating: 6, count: 32),
                               recipients: [.init(node: [UInt8](repeating: 3, count: 32), sealedKey: [UInt8](repeating: 7, count: EpochChange.sealedKeyLength))],
                               signature: [UInt8](repeating: 8, count: 64))]),
]

@Test func linkMessagesRoundTrip() throws {
    for message in samples {
        #expect(try LinkMessage.decode(message.encoded()) == message)
    }
}

/// A punch step without addresses is encoded as before addresses were carried (kind, attempt,
/// step); with them, the step's high bit is set and 1 to `MemberInfo.maximumReach` follow: none
/// or more than that on the wire are refused.
@Test func punchStepsCarryAddressesOnlyWhenThereAreAny() throws {
    let bare = LinkMessage.punch(attempt: 9, step: .connect).encoded()
    #expect(bare.count == 1 + 1 + 4 + 1)
    var five = LinkMessage.punch(attempt: 9, step: .connect, addrs: ["198.51.100.1:1"]).encoded()
    five[bare.count] = UInt8(MemberInfo.maximumReach + 1)
    for _ in 0..<MemberInfo.maximumReach { five += five[(bare.count + 1)...].prefix(2 + "198.51.100.1:1".utf8.count) }
    #expect(throws: CoreError.self) { try LinkMessage.decode(five) }
    var none = LinkMessage.punch(attempt: 9, step: .connect, addrs: ["198.51.100.1:1"]).encoded()
    none[bare.count] = 0
    #expect(throws: CoreError.self) { try LinkMessage.decode(Array(none.prefix(bare.count + 1))) }
    #expect(bare.last == HolePunch.Step.connect.rawValue && none[bare.count - 1] == HolePunch.Step.connect.rawValue | 0x80)
}

@Test func datagramPayloadRoundTrips() throws {
    let payload = DatagramPayload(sender: MemberID(raw: 5), counter: 77, content: .message(WireMessage(origin: MemberID(raw: 5), counter: 1, seq: 0, to: nil, body: [1, 2, 3])))
    #expect(try DatagramPayload.decode(payload.encoded()) == payload)
    let swim = DatagramPayload(sender: MemberID(raw: 5), counter: 78, content: .swim(SWIMMessage(sender: MemberID(raw: 5), kind: .ack(seq: 3))))
    #expect(try DatagramPayload.decode(swim.encoded()) == swim)
}

@Test func memberRecordRoundTrips() throws {
    #expect(try MemberInfo.decode(member(9).encoded()) == member(9))
}

@Test func everyTruncationIsAnErrorNotATrap() {
    for message in samples {
        let bytes = message.encoded()
        for cut in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 300)) {
            #expect(throws: CoreError.self) { try LinkMessage.decode(Array(bytes[..<cut])) }
        }
        #expect(throws: CoreError.self) { try LinkMessage.decode(bytes + [0]) }
    }
}

@Test func randomBytesNeverTrap() {
    var rng = SplitMix64(state: 1)
    var decoded = 0, wrongVersion = 0, wrongVersionDecoded = 0, unstable = 0
    for _ in 0..<20_000 {
        let count = Int.random(in: 0..<200, using: &rng)
        var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
        if count > 1, Bool.random(using: &rng) { bytes[0] = LinkMessage.version; bytes[1] = UInt8.random(in: 1...9, using: &rng) }
        let message = try? LinkMessage.decode(bytes)
        let decodes = message != nil
        if let message {
            decoded += 1
            if (try? LinkMessage.decode(message.encoded())) != message { unstable += 1 }
        }
        // What the rule says, computed here: no input without the version byte decodes.
        if bytes.first != LinkMessage.version {
            wrongVersion += 1
            if decodes { wrongVersionDecoded += 1 }
        }
        _ = try? DatagramPayload.decode(bytes)
        _ = try? MemberInfo.decode(bytes)
    }
    // Valid messages with up to 4 bytes changed: many still decode (the decoders are reached past
    // the header), and one whose version byte changed never does.
    var mutatedDecoded = 0
    for _ in 0..<10_000 {
        var bytes = samples[Int.random(in: 0..<samples.count, using: &rng)].encoded()
        for _ in 0...Int.random(in: 0..<4, using: &rng) { bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
        if bytes[0] != LinkMessage.version { wrongVersion += 1 }
        guard let message = try? LinkMessage.decode(bytes) else { continue }
        mutatedDecoded += 1
        if bytes[0] != LinkMessage.version { wrongVersionDecoded += 1 }
        if (try? LinkMessage.decode(message.encoded())) != message { unstable += 1 }
    }
    #expect(mutatedDecoded > 500, "only \(mutatedDecoded) of 10,000 mutated messages decoded")
    #expect(wrongVersion > 5_000, "the inputs cover other versions")
    #expect(wrongVersionDecoded == 0, "\(wrongVersionDecoded) of \(wrongVersion) inputs of another version decoded")
    #expect(unstable == 0, "\(unstable) decoded messages did not survive encode and decode")
    #expect(decoded < 20_000 - wrongVersion, "\(decoded) decoded")
}

@Test func oversizedLengthsAreRefusedBeforeAllocation() {
    var w = WireWriter()
    w.u8(LinkMessage.version); w.u8(3)
    w.u64(1); w.u64(1); w.u64(1); w.u8(0); w.u16(0); w.u8(0)
    w.u32(UInt32.max)
    #expect(throws: CoreError.self) { try LinkMessage.decode(w.bytes) }
    var list = WireWriter()
    list.u8(LinkMessage.version); list.u8(2); list.u8(1); list.u8(1); list.u32(UInt32.max)
    #expect(throws: CoreError.self) { try LinkMessage.decode(list.bytes) }
}

@Test func unknownVersionIsRefused() {
    var bytes = LinkMessage.hello(since: 1, nonApplication: 0).encoded()
    bytes[0] = 99
    #expect(throws: CoreError.self) { try LinkMessage.decode(bytes) }
}

@Test func recordsSplitAndReassemble() throws {
    for size in [0, 1, LinkRecords.maximumFragment, LinkRecords.maximumFragment + 1, 200_000] {
        let message = (0..<size).map { UInt8(truncatingIfNeeded: $0 * 31) }
        let records = LinkRecords.split(message)
        #expect(records.allSatisfy { $0.count <= LinkRecords.maximumRecord })
        var reassembler = LinkReassembler(limit: 1 << 20)
        var out: [UInt8]?
        for (i, record) in records.enumerated() {
            out = try reassembler.add(record)
            #expect((out == nil) == (i < records.count - 1))
        }
        #expect(out == message)
    }
}

@Test func reassemblerRefusesOversizedMessagesAndBadFlags() {
    var reassembler = LinkReassembler(limit: 100)
    #expect(throws: CoreError.self) { try reassembler.add([1] + [UInt8](repeating: 0, count: 101)) }
    #expect(throws: CoreError.self) { try reassembler.add([]) }
    #expect(throws: CoreError.self) { try reassembler.add([4, 1]) }
}
