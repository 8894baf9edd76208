import Testing
@testable import HuddleCore

@Test func replayWindowAcceptsEachCounterOnce() {
    var window = ReplayWindow()
    #expect(window.accept(1))
    #expect(!window.accept(1))
    #expect(window.accept(3))
    #expect(window.accept(2))
    #expect(!window.accept(2))
    #expect(window.accept(1000))
    #expect(window.accept(500))
    #expect(!window.accept(500))
}

@Test func replayWindowRefusesCountersOlderThanTheWindow() {
    var window = ReplayWindow()
    #expect(window.accept(5000))
    #expect(!window.accept(5000 - ReplayWindow.size))
    #expect(window.accept(5000 - ReplayWindow.size + 1))
    #expect(window.accept(5000 + 3 * ReplayWindow.size))
    #expect(!window.accept(5000))
}

@Test func replayWindowSurvivesRandomOrder() {
    var rng = SplitMix64(state: 3)
    var window = ReplayWindow()
    var counters = Array(UInt64(1)...2000)
    counters.shuffle(using: &rng)
    var accepted = Set<UInt64>()
    for c in counters where window.accept(c) { #expect(accepted.insert(c).inserted) }
    for c in accepted { #expect(!window.accept(c)) }
}
