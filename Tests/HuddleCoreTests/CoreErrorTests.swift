import Testing
@testable import HuddleCore

/// HuddleCore's one error type (`CoreError`): a code a program matches and the line a person reads,
/// the lines the node passes on to the control protocol unchanged from the types it replaced.
@Test func coreErrorsCarryACodeAndTheLineAPersonReads() {
    #expect(CoreError("truncated header") == CoreError(.malformed, "truncated header"))
    #expect("\(CoreError.truncated("header"))" == "truncated header")
    #expect(CoreError.busy(storedBytes: 7).code == .busy(storedBytes: 7))
    #expect(CoreError.busy(storedBytes: 7).message == "retransmit buffers are full (7 bytes held for slow members); try again")
    #expect(CoreError.tooLarge(size: 2, limit: 1, reliable: false).message == "message body is 2 bytes; the limit for unreliable sends is 1")
    #expect(CoreError.rateLimited(until: 3).code == .rateLimited(until: 3))
    #expect(CoreError.ownChangeRefused(.epochMalformed).message == "the epoch rules refused this member's own change (epoch_malformed)")
    #expect(CoreError.noSuchAttachment("x").message == "no attachment x")
    #expect(CoreError.nobodyToRemove.message == "nobody to remove")
}

@Test func aTextThatIsNotHostPortSaysWhy() {
    #expect(throws: CoreError.noPort(bracketed: false)) { try HostPort.split("example.org") }
    #expect(throws: CoreError.noPort(bracketed: true)) { try HostPort.split("[::1]") }
    #expect(throws: CoreError.badPort) { try HostPort.split("a:70000") }
    #expect("\(CoreError.badPort)" == "has a bad port (expected 0-65535)")
    #expect(CoreError.badPort.code == .badAddress)
}
