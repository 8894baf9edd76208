import Testing
@testable import HuddleCore

/// Pure tests of invitation codes and the invitation book (issue 22), with injected time and randomness.
private func bytes(_ seed: UInt8) -> [UInt8] { (0..<16).map { seed &+ UInt8($0) &* 37 } }

@Test func aCodeCarriesAtLeastFortyBitsAndReadsBackWhateverTheCaseOrSeparators() throws {
    #expect(InvitationWords.all.count == 2048 && Set(InvitationWords.all).count == 2048)
    #expect(Set(InvitationWords.all.map { $0.prefix(4) }).count == 2048, "the first four letters name each word")
    #expect(InvitationCode.entropyBits >= 40)
    #expect(1 << (InvitationCode.entropyBits / InvitationCode.wordCount) == InvitationWords.all.count)
    let code = InvitationCode(nameplate: 7, randomBytes: [0, 0, 0, 1, 7, 255, 255, 255])
    #expect(code.text == "7-abandon-ability-zoo-zoo", "each pair of bytes picks one word, modulo 2048")
    #expect(try InvitationCode.parse(code.text) == code)
    #expect(try InvitationCode.parse("  7-ABANDON-Ability-zoo-zoo\n") == code)
    #expect(try InvitationCode.parse("7 abandon ability zoo zoo") == code, "spaces instead of dashes")
}

@Test func aMistypedCodeIsRefusedWithWhatIsWrong() {
    #expect(throws: CoreError.badNameplate("abandon")) { try InvitationCode.parse("abandon-ability-able-about") }
    #expect(throws: CoreError.badNameplate("0")) { try InvitationCode.parse("0-abandon-ability-able-about") }
    #expect(throws: CoreError.wordCount(3)) { try InvitationCode.parse("7-abandon-ability-able") }
    #expect(throws: CoreError.unknownWord("abilty")) { try InvitationCode.parse("7-abandon-abilty-able-about") }
    #expect(throws: CoreError.badNameplate("")) { try InvitationCode.parse("") }
}

@Test func anInvitationExpires() {
    var book = InvitationBook()
    let invitation = book.issue(now: 100, ttl: 600, uses: 1, randomBytes: bytes(1))
    #expect(book.beginAttempt(nameplate: invitation.nameplate, now: 700) == .refused(.expired))
    #expect(book.beginAttempt(nameplate: invitation.nameplate, now: 699.9) == .accepted(invitation.code))
}

@Test func usesAreSpentOnlyBySuccessAndRacingJoinersCannotShareTheLastOne() {
    var book = InvitationBook()
    let two = book.issue(now: 0, ttl: 600, uses: 2, randomBytes: bytes(2)).nameplate
    #expect(book.beginAttempt(nameplate: two, now: 1) == .accepted(book.invitations[two]!.code))
    #expect(book.beginAttempt(nameplate: two, now: 1) == .accepted(book.invitations[two]!.code), "two uses: two at once")
    #expect(book.beginAttempt(nameplate: two, now: 1) == .refused(.busy), "no third while two are in flight")
    book.attemptSucceeded(nameplate: two)
    _ = book.attemptFailed(nameplate: two)
    #expect(book.invitations[two]?.usesLeft == 1, "a failure spends no use")
    #expect(book.beginAttempt(nameplate: two, now: 2) == .accepted(book.invitations[two]!.code))
    book.attemptSucceeded(nameplate: two)
    #expect(book.beginAttempt(nameplate: two, now: 3) == .refused(.usedUp))
    #expect(book.beginAttempt(nameplate: 12345, now: 3) == .refused(.unknown))
}

@Test func threeFailedAttemptsBurnAnInvitation() {
    var book = InvitationBook()
    let plate = book.issue(now: 0, ttl: 600, uses: 5, randomBytes: bytes(3)).nameplate
    for attempt in 1...3 {
        #expect(book.beginAttempt(nameplate: plate, now: 1) == .accepted(book.invitations[plate]!.code))
        #expect(book.attemptFailed(nameplate: plate) == (attempt == 3), "burned by the third failure, reported once")
    }
    #expect(book.beginAttempt(nameplate: plate, now: 2) == .refused(.burned), "even the right code is refused now")
}

@Test func theBookKeepsAtMostItsLimitDroppingDeadInvitationsFirst() {
    var book = InvitationBook()
    let expired = book.issue(now: 0, ttl: 1, uses: 1, randomBytes: bytes(4)).nameplate
    var live: [UInt32] = []
    for i in 1..<InvitationBook.limit { live.append(book.issue(now: 0, ttl: 600, uses: 1, randomBytes: bytes(UInt8(i + 4))).nameplate) }
    #expect(book.invitations.count == InvitationBook.limit)
    #expect(Set(live + [expired]).count == InvitationBook.limit, "nameplates are unique")
    _ = book.issue(now: 10, ttl: 600, uses: 1, randomBytes: bytes(200))
    #expect(book.invitations.count == InvitationBook.limit)
    #expect(book.invitations[expired] == nil, "the expired one went first")
    #expect(live.allSatisfy { book.invitations[$0] != nil })
}
