import HuddleCrypto
import Testing
@testable import HuddleCore

/// Where a push-pull that membership asks for goes (issue 35: no shell finds a link by address):
/// the core sends it over the link of the member whose record names that address, or asks the
/// shell to dial the address with the push-pull to follow (`SessionEffect.dial(_:pushPull:)`).

private func identity(_ raw: UInt64) -> Identity { Identity(seed: [UInt8](repeating: UInt8(raw), count: 32)) }

private func info(_ raw: UInt64, _ name: String) -> MemberInfo {
    MemberInfo(id: MemberID(raw: raw), node: identity(raw).publicKey, name: name, addr: testAddr(name), incarnation: 0).signed(by: identity(raw))
}

/// The push-pulls `me`'s ticks send `peer` (linked or not) over a little more than SWIM's push-pull interval.
private func periodicPushPulls(linked: Bool) -> (overLink: Int, dialed: [Bool]) {
    let me = info(5, "me"), peer = info(9, "peer")
    var c = SessionCore(local: me, identity: identity(5), joining: false, swimSeed: 5, journalSeed: 5)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [peer]), from: peer.addr, now: 1)
    if linked { _ = c.linkUp(peer.id, now: 1) }
    var overLink = 0, dialed: [Bool] = []
    for step in 10...(10 * Int(c.swim.settings.pushPullInterval + 3)) {
        for effect in c.tick(now: Double(step) / 10) {
            if case let .sendLink(to, .pushPull(state)) = effect, to == peer.id, !state.join { overLink += 1 }
            if case let .dial(addr, pushPull?) = effect, addr == peer.addr { dialed.append(pushPull) }
        }
    }
    return (overLink, dialed)
}

@Test func aPeriodicPushPullToALinkedMemberGoesOverItsLinkWithoutADial() {
    let (overLink, dialed) = periodicPushPulls(linked: true)
    #expect(overLink >= 1, "the push-pull went over the link")
    #expect(dialed.isEmpty, "no dial carries a push-pull to a member whose link is up: \(dialed)")
}

@Test func aPeriodicPushPullToAnUnlinkedMemberIsADialThatCarriesIt() {
    let (overLink, dialed) = periodicPushPulls(linked: false)
    #expect(overLink == 0, "no link is up to send it on")
    #expect(!dialed.isEmpty && dialed.allSatisfy { $0 == false }, "a dial carries a plain (not a join's) push-pull: \(dialed)")
}
