import HuddleCrypto
import Testing
@testable import HuddleCore

/// Observed addresses, the NAT kind and paths (issue 36, items 1 and 4), in the pure core.
private let mine = "192.168.1.10:7400"
private func m(_ raw: UInt64) -> MemberID { MemberID(raw: raw) }

@Test func aLoneReportClassifiesByWhatItSawOfTheListeningSocket() {
    var r = ReachObservations()
    #expect(r.nat(advertised: mine) == .unknown, "no report: unknown")
    r.receive(from: m(1), link: nil, datagram: mine, now: 1)
    #expect(r.nat(advertised: mine) == .none, "datagrams seen from the member's own address: no NAT")
    r.receive(from: m(1), link: nil, datagram: "198.51.100.1:7400", now: 2)
    #expect(r.nat(advertised: mine) == .easy, "the port kept: a port-preserving mapping")
    r.receive(from: m(1), link: nil, datagram: "198.51.100.1:31337", now: 3)
    #expect(r.nat(advertised: mine) == .hard, "another port, seen by nobody else")
    #expect(r.reflexive() == ["198.51.100.1:31337"], "one report per reporter: its latest")
}

@Test func theSameRemappedPortSeenByTwoMembersIsEasyAndDifferentPortsAreHard() {
    var r = ReachObservations()
    r.receive(from: m(1), link: nil, datagram: "198.51.100.1:31337", now: 1)
    r.receive(from: m(2), link: nil, datagram: "198.51.100.1:31337", now: 1)
    #expect(r.nat(advertised: mine) == .easy, "one mapping towards both: endpoint-independent")
    r.receive(from: m(2), link: nil, datagram: "198.51.100.1:40001", now: 2)
    r.receive(from: m(3), link: nil, datagram: "198.51.100.1:40002", now: 2)
    #expect(r.nat(advertised: mine) == .hard, "a port per member")
    #expect(Set(r.reflexive()) == ["198.51.100.1:31337", "198.51.100.1:40001", "198.51.100.1:40002"])
}

@Test func aLinkReportAloneIsComparedWithTheLinksOwnEnd() {
    var r = ReachObservations()
    r.linkUp(m(1), remote: "203.0.113.9:7400", local: "192.168.1.10:50000")
    r.receive(from: m(1), link: "198.51.100.1:50000", datagram: nil, now: 1)
    #expect(r.nat(advertised: mine) == .easy)
    r.receive(from: m(1), link: "192.168.1.10:50000", datagram: nil, now: 2)
    #expect(r.nat(advertised: mine) == .none)
    r.receive(from: m(1), link: "198.51.100.1:1234", datagram: nil, now: 3)
    #expect(r.nat(advertised: mine) == .hard)
    // The datagram report, when there is one, decides over the link's.
    r.receive(from: m(1), link: "198.51.100.1:1234", datagram: mine, now: 4)
    #expect(r.nat(advertised: mine) == .none)
}

@Test func oneHostileReporterCannotOutvoteTwoHonestOnes() {
    var r = ReachObservations()
    r.receive(from: m(1), link: nil, datagram: mine, now: 1)
    r.receive(from: m(2), link: nil, datagram: mine, now: 1)
    r.receive(from: m(66), link: nil, datagram: "203.0.113.66:9", now: 1)
    #expect(r.nat(advertised: mine) == .none, "two of three say no NAT")
    #expect(r.reflexive().first == mine, "the address most members saw first")
    // Two reporters that disagree leave it unknown: neither has a majority.
    var split = ReachObservations()
    split.receive(from: m(1), link: nil, datagram: mine, now: 1)
    split.receive(from: m(66), link: nil, datagram: "203.0.113.66:7400", now: 1)
    #expect(split.nat(advertised: mine) == .unknown)
    // Only the reporters counted (the core counts live members) decide.
    #expect(split.nat(advertised: mine, counting: [m(1)]) == .none)
}

@Test func reportsAreBoundedAndOnlyNumericAddressesAreKept() {
    var r = ReachObservations()
    let named = r.receive(from: m(1), link: "example.com:80", datagram: "not an address", now: 0)
    #expect(!named)
    #expect(r.reports.isEmpty)
    let long = r.receive(from: m(1), link: String(repeating: "1", count: 200), datagram: nil, now: 0)
    #expect(!long)
    for i in 0..<1000 {
        r.receive(from: m(UInt64(i + 1)), link: nil, datagram: "198.51.100.\(i % 250):\(1000 + i)", now: Double(i))
    }
    #expect(r.reports.count == ReachObservations.reporterLimit)
    #expect(r.reports.keys.allSatisfy { $0.raw > 1000 - UInt64(ReachObservations.reporterLimit) }, "the oldest reporters were dropped")
    #expect(r.reflexive().count <= ReachObservations.reporterLimit)
    r.linkDown(m(1000))
    #expect(r.reports[m(1000)] == nil, "a closed link's report no longer counts")
}

@Test func whatAMemberSeesOfAPeerIsReportedOnChangeAndAgainAfterTheRefresh() {
    var r = ReachObservations()
    #expect(r.due(now: 0).isEmpty)
    r.linkUp(m(1), remote: "198.51.100.1:40000", local: "203.0.113.9:7400")
    let first = r.due(now: 1)
    #expect(first.count == 1 && first[0].peer == m(1) && first[0].link == "198.51.100.1:40000" && first[0].datagram == nil)
    #expect(r.due(now: 1.1).isEmpty && r.due(now: 3).isEmpty, "unchanged: not again before the refresh")
    r.sawDatagram(from: m(1), source: "198.51.100.1:7400")
    r.sawDatagram(from: m(2), source: "198.51.100.2:7400")  // not linked: ignored
    let changed = r.due(now: 3.1)
    #expect(changed.count == 1 && changed[0].datagram == "198.51.100.1:7400")
    #expect(r.due(now: 3.1 + ReachObservations.refresh).count == 1, "sent again after the refresh")
    r.linkDown(m(1))
    #expect(r.due(now: 100).isEmpty)
}

// MARK: in the session core

private func info(_ raw: UInt64, _ name: String) -> MemberInfo {
    let identity = Identity(seed: [UInt8](repeating: UInt8(raw), count: 32))
    return MemberInfo(id: MemberID(raw: raw), node: identity.publicKey, name: name, addr: testAddr(name), incarnation: 0).signed(by: identity)
}

private let me = info(5, "me")
private func core() -> SessionCore {
    SessionCore(local: me, identity: Identity(seed: [UInt8](repeating: 5, count: 32)), joining: false, swimSeed: 1, journalSeed: 1)
}
private func pathEvents(_ effects: [SessionEffect]) -> [MemberID] {
    effects.compactMap { if case let .member(.path, info) = $0 { info.id } else { nil } }
}

@Test func aPathIsDirectWhileALinkIsUpAndEachChangeIsAnEvent() {
    var c = core()
    let peer = info(9, "peer")
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [peer]), from: testAddr("peer"), now: 1)
    #expect(c.path(to: me.id) == .self && c.path(to: peer.id) == .none)
    _ = c.linkUp(peer.id)
    let up = c.linkAddresses(peer.id, remote: "198.51.100.1:40000", local: me.addr, now: 1)
    #expect(c.path(to: peer.id) == .direct && pathEvents(up) == [peer.id])
    #expect(up.contains(.sendLink(peer.id, .observed(link: "198.51.100.1:40000", datagram: ""))), "the peer is told at once where its link comes from")
    let down = c.linkDown(peer.id, settled: false, now: 2)
    #expect(c.path(to: peer.id) == .none && pathEvents(down) == [peer.id])
    // A stranger's link (not a member yet) is no member event.
    _ = c.linkUp(MemberID(raw: 77))
    #expect(pathEvents(c.linkAddresses(MemberID(raw: 77), remote: "198.51.100.7:1", local: me.addr, now: 3)).isEmpty)
}

@Test func theCoreClassifiesFromItsLivePeersReportsOverTheirLinks() {
    var c = core()
    let a = info(7, "a"), b = info(8, "b"), stranger = MemberID(raw: 99)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [a, b]), from: testAddr("a"), now: 1)
    #expect(c.nat == .unknown && c.reflexive.isEmpty)
    _ = c.receiveLink(.observed(link: "", datagram: me.addr), from: a.id, addr: a.addr, now: 2)
    _ = c.receiveLink(.observed(link: "", datagram: "203.0.113.1:1"), from: stranger, addr: testAddr("x"), now: 2)
    #expect(c.nat == .none && c.reflexive == [me.addr], "a report from a peer that is not a member does not count")
    _ = c.receiveLink(.observed(link: "", datagram: "198.51.100.1:4444"), from: b.id, addr: b.addr, now: 3)
    #expect(c.nat == .unknown, "one says none, one says hard: no majority")
    let refused = c.receiveLink(.observed(link: "evil.example:1", datagram: ""), from: b.id, addr: b.addr, now: 4)
    #expect(refused.contains(.refused(.hostnameAddress)) && c.refusals[.hostnameAddress] == 1)
}

@Test func observedReportsTravelBetweenTwoCoresAndEachLearnsItsMapping() {
    // Two cores linked as the node links them: `nat` sees `me` behind a port-preserving NAT.
    var c = core()
    let peerIdentity = Identity(seed: [UInt8](repeating: 9, count: 32))
    let peer = info(9, "peer")
    var p = SessionCore(local: peer, identity: peerIdentity, joining: false, swimSeed: 2, journalSeed: 2)
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [peer]), from: peer.addr, now: 1)
    _ = p.receivePushPull(SWIMPushPull(join: false, members: [me]), from: me.addr, now: 1)
    let natted = "198.51.100.1:\((try? HostPort.split(me.addr).port) ?? 0)"
    _ = c.linkUp(peer.id); _ = p.linkUp(me.id)
    _ = c.linkAddresses(peer.id, remote: peer.addr, local: "10.0.0.5:50000", now: 1)
    var toMe = p.linkAddresses(me.id, remote: "198.51.100.1:50000", local: peer.addr, now: 1)
    p.reach.sawDatagram(from: me.id, source: natted)
    toMe += p.tick(now: 2)
    for case let .sendLink(to, message) in toMe where to == me.id { _ = c.receiveLink(message, from: peer.id, addr: peer.addr, now: 2) }
    #expect(c.nat == .easy && c.reflexive == [natted])
}

/// Finding (f): the reach address a member signs is one its reporters agree on: two or more, no
/// tie (a hostile one cannot pick by the order of addresses), a lone dissenter cannot win. A lone
/// reporter's address is never signed (issue 36, lone reach reporters): it is `loneDatagramSource`.
@Test func theSignedReachAddressNeedsReportersThatAgree() {
    var r = ReachObservations()
    #expect(r.agreedDatagramSource() == nil && r.loneDatagramSource() == nil)
    r.receive(from: m(5), link: nil, datagram: "198.51.100.1:7400", now: 1)
    #expect(r.agreedDatagramSource() == nil, "a lone reporter's word is not signed")
    #expect(r.loneDatagramSource() == "198.51.100.1:7400" && r.loneDatagramSource(counting: [m(66)]) == nil)
    r.receive(from: m(66), link: nil, datagram: "0.0.0.1:7400", now: 2)
    #expect(r.loneDatagramSource() == nil, "two reporters: none is lone")
    #expect(r.nat(advertised: mine) == .easy, "both say port kept")
    #expect(r.agreedDatagramSource() == nil, "a tie: no address (it used to be the lowest one, the hostile one's)")
    r.receive(from: m(7), link: nil, datagram: "198.51.100.1:7400", now: 3)
    #expect(r.agreedDatagramSource() == "198.51.100.1:7400", "two agree")
    #expect(r.agreedDatagramSource(counting: [m(5), m(66)]) == nil)
    var two = ReachObservations()
    two.receive(from: m(5), link: nil, datagram: "198.51.100.1:7400", now: 1)
    two.receive(from: m(66), link: "203.0.113.9:1", datagram: nil, now: 1)
    #expect(two.agreedDatagramSource() == nil && two.loneDatagramSource() == "198.51.100.1:7400", "only datagram reports count")
}
