import HuddleCore
import Testing
@testable import HuddleNode

/// The test-only hostile relay (`RelayCorruption`): each mode does what the host tests rely on,
/// and the plaintext scan finds its text across message boundaries (so its 0 in the hostile-relay
/// host test means something).
private let sender = MemberID(raw: 7)

@Test func theHostileRelayKnobCorruptsOnceDropsEveryOtherOrHoldsAllPastItsThreshold() {
    var off = RelayCorruption(environment: [:])
    off.count(1 << 20)
    let untouched = off.apply([1, 2, 3])
    #expect(untouched == [1, 2, 3] && off.tampered == 0, "off without its variable")

    var corrupt = RelayCorruption(environment: [RelayCorruption.variable: "10"])
    corrupt.count(5)
    let below = corrupt.apply([1, 2, 3])
    #expect(below == [1, 2, 3], "below the threshold: as it is")
    corrupt.count(5)
    let flipped = corrupt.apply([1, 2, 3])
    let after = corrupt.apply([1, 2, 3])
    #expect(flipped == [1, 2 ^ 0x5A, 3])
    #expect(after == [1, 2, 3] && corrupt.flipped == 1 && corrupt.tampered == 1, "once per run")

    var drop = RelayCorruption(environment: [RelayCorruption.variable: "0", RelayCorruption.modeVariable: "drop"])
    let dropped = (0..<10).map { _ in drop.apply([9]) }
    #expect(dropped.filter { $0 == nil }.count == 5 && dropped.compactMap { $0 }.count == 5 && drop.tampered == 10)

    var stall = RelayCorruption(environment: [RelayCorruption.variable: "0", RelayCorruption.modeVariable: "stall"])
    let held = (0..<10).map { _ in stall.apply([9]) }
    #expect(held.allSatisfy { $0 == nil } && stall.tampered == 10, "holds everything")
}

@Test func thePlaintextScanFindsItsTextAcrossMessagesOfOneSender() {
    var scan = RelayCorruption(environment: [RelayCorruption.scanVariable: "secret"])
    scan.scan(Array("xx-sec".utf8), from: sender)
    scan.scan(Array("ret-yy-secret".utf8), from: sender)
    #expect(scan.sightings == 2, "one split across two messages, one whole")
    scan.scan(Array("sec".utf8), from: MemberID(raw: 8))
    scan.scan(Array("ret".utf8), from: sender)
    #expect(scan.sightings == 2, "another sender's bytes do not complete it")
    #expect(RelayCorruption.occurrences(of: Array("aa".utf8), in: Array("aaa".utf8)) == 2)
    var none = RelayCorruption(environment: [:])
    none.scan(Array("secret".utf8), from: sender)
    #expect(none.sightings == 0)
}
