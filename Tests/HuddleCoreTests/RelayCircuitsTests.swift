import Testing
@testable import HuddleCore

/// The relay's circuit table and budget (issue 36, item 2; pure, not wired into the node yet).
private func m(_ raw: UInt64) -> MemberID { MemberID(raw: raw) }

@Test func aCircuitOpensOnlyBetweenTwoLinkedMembersAndForwardsOnlyToTheOtherEnd() {
    var r = RelayCircuits(local: m(1))
    #expect(r.open(from: m(2), to: m(3), now: 0) == .notLinked)
    r.linkUp(m(2)); r.linkUp(m(3)); r.linkUp(m(4))
    #expect(r.open(from: m(2), to: m(1), now: 0) == .ownCircuit)
    #expect(r.open(from: m(2), to: m(3), now: 0) == nil)
    #expect(r.open(from: m(3), to: m(2), now: 0) == .duplicate)
    #expect(r.forward(100, from: m(2), to: m(3), now: 1) == .success(m(3)))
    #expect(r.forward(100, from: m(3), to: m(2), now: 1) == .success(m(2)))
    #expect(r.forward(100, from: m(2), to: m(4), now: 1) == .failure(.relayRefused(.noCircuit)), "no circuit 2–4")
    #expect(r.forwardedBytes == 200)
    #expect(r.linkDown(m(3)) == [m(2)], "the other end is told")
    #expect(r.forward(100, from: m(2), to: m(3), now: 2) == .failure(.relayRefused(.noCircuit)))
}

@Test func circuitsAreBoundedPerMemberAndInAll() {
    var budget = RelayCircuits.Budget()
    budget.circuits = 5
    budget.circuitsPerMember = 2
    var r = RelayCircuits(local: m(1), budget: budget)
    for i in 2...20 { r.linkUp(m(UInt64(i))) }
    #expect(r.open(from: m(2), to: m(3), now: 0) == nil)
    #expect(r.open(from: m(2), to: m(4), now: 0) == nil)
    #expect(r.open(from: m(2), to: m(5), now: 0) == .memberCircuitsFull, "a flood from one member stops at its share")
    var opened = 2
    for i in stride(from: 6, to: 20, by: 2) where r.open(from: m(UInt64(i)), to: m(UInt64(i + 1)), now: 0) == nil { opened += 1 }
    #expect(opened == 5 && r.circuits.count == 5 && r.refusals[.circuitsFull, default: 0] > 0)
    var off = RelayCircuits(local: m(1), budget: .none)
    off.linkUp(m(2)); off.linkUp(m(3))
    #expect(off.open(from: m(2), to: m(3), now: 0) == .circuitsFull, "--no-relay: nothing")
}

/// A member over its rate is paced, not cut off: its bytes take the bucket into debt and the shell
/// stops reading its link until the debt is paid (`readPause`); only bytes past a burst of debt
/// (a reader that did not pause) are refused.
@Test func aMemberOverItsRateIsPausedUntilTheBucketRefillsAndOnlyABurstOfDebtIsRefused() {
    var budget = RelayCircuits.Budget()
    budget.bytesPerSecond = 1000
    budget.burstBytes = 2000
    var r = RelayCircuits(local: m(1), budget: budget)
    r.linkUp(m(2)); r.linkUp(m(3))
    _ = r.open(from: m(2), to: m(3), now: 0)
    let none: (MemberID) -> Int = { _ in 0 }
    #expect(r.forward(1500, from: m(2), to: m(3), now: 0) == .success(m(3)))
    #expect(r.readPause(for: m(2), queued: none, now: 0) == nil, "500 tokens left: read on")
    #expect(r.forward(1000, from: m(2), to: m(3), now: 0) == .success(m(3)), "over the rate: forwarded, in debt")
    #expect(r.readPause(for: m(2), queued: none, now: 0) == 0.5, "500 in debt at 1000/s: half a second without reading")
    #expect(r.readPause(for: m(3), queued: none, now: 0) == nil, "each member has its own bucket")
    #expect(r.readPause(for: m(2), queued: none, now: 0.5) == nil, "paid")
    #expect(r.forward(2000, from: m(2), to: m(3), now: 0.5) == .success(m(3)))
    #expect(r.forward(1, from: m(2), to: m(3), now: 0.5) == .failure(.relayRefused(.overBudget)), "a burst of debt at most")
    #expect(r.forward(Int.max, from: m(2), to: m(3), now: 1e9) == .failure(.relayRefused(.overBudget)))
    #expect(r.refusals[.overBudget] == 2)
}

@Test func anIdleCircuitIsClosed() {
    var r = RelayCircuits(local: m(1))
    r.linkUp(m(2)); r.linkUp(m(3))
    _ = r.open(from: m(2), to: m(3), now: 0)
    _ = r.forward(1, from: m(2), to: m(3), now: 20)
    #expect(r.tick(now: 40).isEmpty)
    #expect(r.tick(now: 50) == [RelayCircuits.Pair(m(2), m(3))])
    #expect(r.circuits.isEmpty)
}

@Test func nothingIsForwardedToAMemberWithAFullQueueAndACircuitCanBeClosed() {
    var budget = RelayCircuits.Budget()
    budget.queueBytes = 1000
    var r = RelayCircuits(local: m(1), budget: budget)
    r.linkUp(m(2)); r.linkUp(m(3))
    _ = r.open(from: m(2), to: m(3), now: 0)
    #expect(r.forward(10, from: m(2), to: m(3), queued: 999, now: 0) == .success(m(3)))
    #expect(r.readPause(for: m(2), queued: { _ in 999 }, now: 0) == nil)
    #expect(r.readPause(for: m(2), queued: { _ in 1000 }, now: 0) == RelayCircuits.queuePause, "a full queue: its filler waits")
    #expect(r.forward(10, from: m(2), to: m(3), queued: 1999, now: 0) == .success(m(3)))
    #expect(r.forward(10, from: m(2), to: m(3), queued: 2000, now: 0) == .failure(.relayRefused(.queueFull)), "the circuit's queue is bounded")
    #expect(r.joins(m(3), m(2)) && r.close(m(3), m(2)) && !r.joins(m(2), m(3)) && !r.close(m(2), m(3)))
    #expect(RelayCircuits.Budget(bytesPerSecond: 1000).burstBytes == 2000 && RelayCircuits.Budget(bytesPerSecond: .max).burstBytes == .max)
}

/// Item 6: a flood of circuit requests from one member (to every member, again and again) opens
/// at most its share, every other request is refused and counted by reason, and the relay's
/// tables stay the size of its budget.
@Test func aFloodOfCircuitRequestsIsRefusedCountedAndBoundsTheRelaysMemory() {
    var r = RelayCircuits(local: m(1))
    for i in 2...200 { r.linkUp(m(UInt64(i))) }
    var opened = 0
    for round in 0..<50 {
        for to in 3...200 where r.open(from: m(2), to: m(UInt64(to)), now: Double(round)) == nil { opened += 1 }
    }
    let requests = 50 * 198
    #expect(opened == RelayCircuits.Budget().circuitsPerMember, "one member's flood opens its share only")
    #expect(r.circuits.count == opened)
    #expect(r.refusals.values.reduce(0, +) == requests - opened, "every other request refused and counted")
    #expect(r.refusals[.memberCircuitsFull, default: 0] > 0 && r.refusals[.duplicate, default: 0] > 0)
    // Others still get circuits: the flooder's share is its own.
    #expect(r.open(from: m(50), to: m(51), now: 60) == nil)
}

/// Finding (b): an accept costs the relay one forward per circuit, from the member it was offered
/// to only; repeats, the asker's own "accept" and accepts of circuits that do not exist forward nothing.
@Test func anAcceptIsForwardedOnceAndOnlyFromTheMemberTheCircuitWasOfferedTo() {
    var r = RelayCircuits(local: m(1))
    r.linkUp(m(2)); r.linkUp(m(3)); r.linkUp(m(4))
    let early = r.accept(from: m(3), to: m(2))
    #expect(!early, "no circuit yet")
    _ = r.open(from: m(2), to: m(3), now: 0)
    let byAsker = r.accept(from: m(2), to: m(3))
    let byOther = r.accept(from: m(4), to: m(2))
    #expect(!byAsker, "the asker cannot accept its own request")
    #expect(!byOther, "not a member of the circuit")
    let first = r.accept(from: m(3), to: m(2))
    #expect(first, "the member it was offered to, once")
    var repeats = 0
    for _ in 0..<1000 where r.accept(from: m(3), to: m(2)) { repeats += 1 }
    #expect(repeats == 0)
    // Closed and opened again: a new circuit, accepted once again.
    let closed = r.close(m(2), m(3))
    _ = r.open(from: m(3), to: m(2), now: 1)
    let again = r.accept(from: m(2), to: m(3))
    let twice = r.accept(from: m(2), to: m(3))
    #expect(closed && again && !twice)
}

/// Finding (c): member 3 has circuits with 2 and 4 through this relay; 2 floods 3 until 3's queue
/// is full. Only 2 is paused (its circuit fills the queue); 4 is read on and its bytes still pass,
/// until twice the budget waits, when nothing more is queued for 3 at all.
@Test func oneCircuitsFloodDoesNotCloseAnotherCircuitOfTheSameMember() {
    var budget = RelayCircuits.Budget()
    budget.queueBytes = 10_000
    var r = RelayCircuits(local: m(1), budget: budget)
    r.linkUp(m(2)); r.linkUp(m(3)); r.linkUp(m(4))
    _ = r.open(from: m(2), to: m(3), now: 0)
    _ = r.open(from: m(4), to: m(3), now: 0)
    var queued = 0
    #expect(r.forward(100, from: m(4), to: m(3), queued: queued, now: 0) == .success(m(3)))
    queued += 100
    while queued < 10_000 {
        #expect(r.forward(1000, from: m(2), to: m(3), queued: queued, now: 0) == .success(m(3)))
        queued += 1000
    }
    let full: (MemberID) -> Int = { $0 == m(3) ? queued : 0 }
    #expect(r.readPause(for: m(2), queued: full, now: 0) == RelayCircuits.queuePause, "the flooder waits")
    #expect(r.readPause(for: m(4), queued: full, now: 0) == nil, "the other member is read on")
    #expect(r.forward(100, from: m(4), to: m(3), queued: queued, now: 0) == .success(m(3)), "the other circuit goes on")
    #expect(r.forward(100, from: m(4), to: m(3), queued: 20_000, now: 0) == .failure(.relayRefused(.queueFull)), "twice the budget: none")
    // The queue drained: the count starts over.
    #expect(r.forward(1000, from: m(2), to: m(3), queued: 0, now: 1) == .success(m(3)))
    #expect(r.readPause(for: m(2), queued: { _ in 10_000 }, now: 1) == RelayCircuits.queuePause)
}

/// Finding (c), continued: the flooder's circuit closed while its bytes still fill the queue, the
/// other circuit is not taken for the one filling it.
@Test func theCircuitLeftAfterAFlooderClosedIsNotBlamedForTheFloodersBytes() {
    var budget = RelayCircuits.Budget()
    budget.queueBytes = 10_000
    var r = RelayCircuits(local: m(1), budget: budget)
    r.linkUp(m(2)); r.linkUp(m(3)); r.linkUp(m(4))
    _ = r.open(from: m(2), to: m(3), now: 0)
    _ = r.open(from: m(4), to: m(3), now: 0)
    #expect(r.forward(9_000, from: m(2), to: m(3), queued: 1, now: 0) == .success(m(3)))
    #expect(r.forward(500, from: m(4), to: m(3), queued: 9_001, now: 0) == .success(m(3)))
    let closed = r.close(m(2), m(3))
    #expect(closed)
    #expect(r.forward(500, from: m(4), to: m(3), queued: 10_000, now: 0) == .success(m(3)))
    #expect(r.linkDown(m(3)) == [m(4)])
}
