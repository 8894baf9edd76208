import Testing
@testable import HuddleCore

private let low = MemberID(raw: 1), mid = MemberID(raw: 5), high = MemberID(raw: 9)

@Test func theLowerIdDialsAtOnce() {
    var planner = LinkPlanner(local: low)
    let dial = planner.want(mid, addr: testAddr("a"), now: 0)
    #expect(dial == LinkPlanner.Dial(member: mid, addr: testAddr("a")))
    let early = planner.tick(now: 1)
    #expect(early.isEmpty)
    let again = planner.tick(now: 2.5)
    #expect(again == [LinkPlanner.Dial(member: mid, addr: testAddr("a"))])
}

@Test func theHigherIdWaitsForGraceThenRedials() {
    var planner = LinkPlanner(local: high)
    let first = planner.want(mid, addr: testAddr("a"), now: 0)
    #expect(first == nil)
    let beforeGrace = planner.tick(now: 0.5)
    #expect(beforeGrace.isEmpty)
    let afterGrace = planner.tick(now: 1.1)
    #expect(afterGrace.count == 1)
    let tooSoon = planner.tick(now: 2)
    #expect(tooSoon.isEmpty)
    let redial = planner.tick(now: 3.2)
    #expect(redial.count == 1)
}

@Test func linkedOrForgottenMembersAreNotDialed() {
    var planner = LinkPlanner(local: low)
    _ = planner.want(mid, addr: testAddr("a"), now: 0)
    planner.linkUp(mid)
    let linked = planner.tick(now: 10)
    #expect(linked.isEmpty)
    planner.linkDown(mid)
    let down = planner.tick(now: 20)
    #expect(down.count == 1)
    planner.forget(mid)
    let forgotten = planner.tick(now: 30)
    #expect(forgotten.isEmpty)
    let selfDial = planner.want(low, addr: "self", now: 0)
    #expect(selfDial == nil)
}

@Test func duplicateLinksKeepTheOneDialedByTheLowerId() {
    #expect(LinkPlanner.keepsNewLink(newDialedBy: low, existingDialedBy: high))
    #expect(!LinkPlanner.keepsNewLink(newDialedBy: high, existingDialedBy: low))
}
