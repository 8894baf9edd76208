import HuddleCrypto
import Testing
@testable import HuddleCore

/// Where a push-pull that membership asks for goes (issue 35: no shell finds a link by address):
/// over the link of the member SWIM chose when that member is live and linked (by its id, not by
/// the address its record claims), else as a dial of the address with the push-pull to follow
/// (`SessionEffect.dial(_:pushPull:)`), whose handshake proves who is there.

private func identity(_ raw: UInt64) -> Identity { Identity(seed: [UInt8](repeating: UInt8(raw), count: 32)) }

private func info(_ raw: UInt64, _ name: String, addr: String? = nil) -> MemberInfo {
    MemberInfo(id: MemberID(raw: raw), node: identity(raw).publicKey, name: name, addr: addr ?? testAddr(name), incarnation: 0).signed(by: identity(raw))
}

private struct Sent {
    var overLink: [MemberID] = []
    var dialed: [(addr: String, join: Bool)] = []
    /// The peer's state each time a push-pull went out.
    var peerStates: [MemberState] = []
}

/// The push-pulls (not a join's) `me`'s ticks send over `seconds`, knowing `others`, with `linked`
/// up; `probing: false` keeps every member alive (no probe goes out, so none fails).
private func pushPulls(knowing others: [MemberInfo], linked: [MemberID], probing: Bool, seconds: Int) -> Sent {
    let me = info(5, "me")
    var settings = SWIMSettings.lan
    if !probing { settings.probeInterval = 100_000 }
    var c = SessionCore(local: me, identity: identity(5), settings: settings, joining: false, swimSeed: 5, journalSeed: 5)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: others), from: others[0].addr, now: 1)
    for peer in linked { _ = c.linkUp(peer, now: 1) }
    var sent = Sent()
    for step in 10...(10 * seconds) {
        for effect in c.tick(now: Double(step) / 10) {
            if case let .sendLink(to, .pushPull(state)) = effect, !state.join {
                sent.overLink.append(to)
                sent.peerStates.append(c.swim.members[to]?.state ?? .left)
            }
            if case let .dial(addr, pushPull?) = effect { sent.dialed.append((addr, pushPull)) }
        }
    }
    return sent
}

@Test func aPeriodicPushPullToALiveLinkedMemberGoesOverItsLinkWithoutADial() {
    let peer = info(9, "peer")
    let sent = pushPulls(knowing: [peer], linked: [peer.id], probing: false, seconds: 16)
    #expect(!sent.overLink.isEmpty && sent.overLink.allSatisfy { $0 == peer.id }, "the push-pull went over the link: \(sent.overLink)")
    #expect(sent.peerStates.allSatisfy { $0 == .alive }, "the peer was alive when it went: \(sent.peerStates)")
    #expect(sent.dialed.isEmpty, "no dial carries a push-pull to a member whose link is up: \(sent.dialed)")
}

@Test func aPeriodicPushPullToALiveUnlinkedMemberIsADialThatCarriesIt() {
    let peer = info(9, "peer")
    let sent = pushPulls(knowing: [peer], linked: [], probing: false, seconds: 16)
    #expect(sent.overLink.isEmpty, "no link is up to send it on")
    #expect(!sent.dialed.isEmpty && sent.dialed.allSatisfy { $0.addr == peer.addr && !$0.join }, "a dial carries a plain push-pull: \(sent.dialed)")
}

/// A failed member whose link is not down yet: the re-merge dials its address (a fresh handshake)
/// rather than trusting the closing link.
@Test func aReMergeToAFailedMemberIsADialEvenWhileItsLinkIsStillUp() {
    let peer = info(9, "peer")
    let sent = pushPulls(knowing: [peer], linked: [peer.id], probing: true, seconds: 30)
    #expect(sent.peerStates.allSatisfy { $0 == .alive }, "only a live member's link carries a push-pull: \(sent.peerStates)")
    #expect(sent.dialed.contains { $0.addr == peer.addr && !$0.join }, "the re-merge dials the failed member's address: \(sent.dialed)")
}

/// A member whose record claims another member's address (`liar`, linked; `peer` is not) takes
/// nothing meant for that member: a push-pull SWIM aims at `peer` is a dial of the address, whose
/// handshake proves who answers, never a send over the liar's link (the old lookup by address
/// sent it there).
@Test func aRecordClaimingAnotherMembersAddressDivertsNoPushPull() {
    let peer = info(9, "peer"), liar = info(7, "liar", addr: testAddr("peer"))
    let sent = pushPulls(knowing: [peer, liar], linked: [liar.id], probing: false, seconds: 200)
    #expect(sent.dialed.contains { $0.addr == peer.addr && !$0.join }, "a push-pull aimed at peer is a dial: \(sent.dialed)")
    #expect(sent.overLink.allSatisfy { $0 == liar.id }, "only those aimed at the liar go over its link: \(sent.overLink)")
}
