import Testing
@testable import HuddleCore

@Test func replayWindowAcceptsEachCounterOnce() {
    var window = ReplayWindow()
    let r1 = window.accept(1)
    #expect(r1)
    let r2 = window.accept(1)
    #expect(!r2)
    let r3 = window.accept(3)
    #expect(r3)
    let r4 = window.accept(2)
    #expect(r4)
    let r5 = window.accept(2)
    #expect(!r5)
    let r6 = window.accept(1000)
    #expect(r6)
    let r7 = window.accept(500)
    #expect(r7)
    let r8 = window.accept(500)
    #expect(!r8)
}

@Test func replayWindowRefusesCountersOlderThanTheWindow() {
    var window = ReplayWindow()
    let r9 = window.accept(5000)
    #expect(r9)
    let r10 = window.accept(5000 - ReplayWindow.size)
    #expect(!r10)
    let r11 = window.accept(5000 - ReplayWindow.size + 1)
    #expect(r11)
    let r12 = window.accept(5000 + 3 * ReplayWindow.size)
    #expect(r12)
    let r13 = window.accept(5000)
    #expect(!r13)
}

@Test func replayWindowSurvivesRandomOrder() {
    var rng = SplitMix64(state: 3)
    var window = ReplayWindow()
    var counters = Array(UInt64(1)...2000)
    counters.shuffle(using: &rng)
    var accepted = Set<UInt64>()
    for c in counters where window.accept(c) { #expect(accepted.insert(c).inserted) }
    for c in accepted {
        let again = window.accept(c)
        #expect(!again)
    }
}
