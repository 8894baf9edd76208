import HuddleCrypto
import Testing
@testable import HuddleCore

/// Relaying in the session core (issue 36, item 2): A and B, which cannot link, get a circuit
/// through R that both link to; R forwards bytes only; the path is `relayed` via R; SWIM goes
/// over the relayed link; R's budget refuses and counts; a relay that goes away closes circuits.
private let a = MemberID(raw: 1), r = MemberID(raw: 2), b = MemberID(raw: 3)
private let identities = [a: Identity(seed: [UInt8](repeating: 1, count: 32)), r: Identity(seed: [UInt8](repeating: 2, count: 32)),
                          b: Identity(seed: [UInt8](repeating: 3, count: 32))]
private func info(_ id: MemberID) -> MemberInfo {
    MemberInfo(id: id, node: identities[id]!.publicKey, name: "\(id.raw)", addr: testAddr("m\(id.raw)")).signed(by: identities[id]!)
}

/// Three cores that all know each other; A–R and R–B linked, A–B not.
private struct Trio {
    var cores: [MemberID: SessionCore] = [:]

    init(relayBudget: RelayCircuits.Budget = .init()) {
        for id in [a, r, b] {
            var c = SessionCore(local: info(id), identity: identities[id]!, joining: false, swimSeed: id.raw, journalSeed: id.raw)
            if id == r { c.setRelayBudget(relayBudget) }
            _ = c.receivePushPull(SWIMPushPull(join: false, members: [a, r, b].filter { $0 != id }.map(info)), from: testAddr("m"), now: 0)
            cores[id] = c
        }
        for (x, y) in [(a, r), (r, b)] {
            _ = cores[x]!.linkUp(y)
            _ = cores[y]!.linkUp(x)
        }
    }

    /// `effects` of `from`, carried out as the shells would: link messages delivered (recursively),
    /// the rest returned by member.
    mutating func run(_ effects: [SessionEffect], of from: MemberID, now: Double) -> [(MemberID, SessionEffect)] {
        var other: [(MemberID, SessionEffect)] = []
        for effect in effects {
            if case let .sendLink(to, message) = effect {
                switch message {
                case .circuitRequest, .circuitOffer, .circuitAccept, .circuitRefuse, .circuitData, .circuitClose:
                    let out = cores[to]!.receiveLink(message, from: from, addr: info(from).addr, now: now)
                    other += run(out, of: to, now: now)
                default: other.append((from, effect))
                }
            } else {
                other.append((from, effect))
            }
        }
        return other
    }

    mutating func tick(_ id: MemberID, now: Double) -> [(MemberID, SessionEffect)] { run(cores[id]!.tick(now: now), of: id, now: now) }
}

/// Per member, the circuit it was told is up: (peer, via, initiator).
private func circuitsUp(_ effects: [(MemberID, SessionEffect)]) -> [MemberID: (MemberID, MemberID, Bool)] {
    var up: [MemberID: (MemberID, MemberID, Bool)] = [:]
    for case let (at, .circuitUp(peer, via, initiator)) in effects { up[at] = (peer, via, initiator) }
    return up
}

@Test func twoMembersThatCannotLinkGetACircuitThroughAMemberBothReachAndLinkOverIt() {
    var t = Trio()
    #expect(circuitsUp(t.tick(a, now: 0.5)).isEmpty, "before the direct grace, nothing is asked")
    #expect(circuitsUp(t.tick(a, now: 1.9)).isEmpty)
    let up = circuitsUp(t.tick(a, now: 2))
    #expect(up[a]! == (b, r, true) && up[b]! == (a, r, false), "A starts the handshake, B answers; both through R")
    #expect(t.cores[r]!.relay.joins(a, b))

    // R forwards the circuit's bytes as they are, only to the other end; the ends hand them to their link.
    let bytes: [UInt8] = Array(0..<200)
    let forwarded = t.cores[r]!.receiveLink(.circuitData(peer: b, bytes: bytes), from: a, addr: info(a).addr, now: 4)
    #expect(forwarded == [.sendLink(b, .circuitData(peer: a, bytes: bytes))])
    #expect(t.cores[b]!.receiveLink(.circuitData(peer: a, bytes: bytes), from: r, addr: info(r).addr, now: 4) == [.circuitBytes(peer: a, via: r, bytes)])
    #expect(t.cores[b]!.receiveLink(.circuitData(peer: a, bytes: bytes), from: MemberID(raw: 9), addr: "x", now: 4).isEmpty, "only from the circuit's relay")
    #expect(t.cores[r]!.relay.forwardedBytes == 200)

    // The link over the circuit: admitted only for that peer and relay; its path is relayed via R.
    #expect(!t.cores[b]!.admitsRelayedLink(a, via: MemberID(raw: 9)) && t.cores[b]!.admitsRelayedLink(a, via: r))
    for (x, y) in [(a, b), (b, a)] {
        _ = t.cores[x]!.linkUp(y, via: r)
        #expect(t.cores[x]!.path(to: y) == .relayed && t.cores[x]!.via(y) == r)
        #expect(t.cores[x]!.path(to: r) == .direct && t.cores[x]!.via(r) == nil)
        #expect(t.cores[x]!.relayedPathEvent(y).count == 1)
    }
    // SWIM to a relayed member goes over the link, not as a datagram its NAT would drop.
    let ping = SWIMMessage(sender: a, kind: .ping(seq: 7, target: b))
    #expect(t.cores[a]!.datagram(ping, to: info(b).addr) == .sendLink(b, .swim(ping)))
    let toR = SWIMMessage(sender: a, kind: .ping(seq: 8, target: r))
    if case .sendLink? = t.cores[a]!.datagram(toR, to: info(r).addr) { Issue.record("a direct member's probe is a datagram") }

    // R goes away: the circuit closes at both ends, and the link over it with it.
    let gone = t.cores[r]!.linkDown(a, settled: false, now: 5)
    #expect(gone.contains(.sendLink(b, .circuitClose(peer: a))))
    #expect(t.cores[b]!.receiveLink(.circuitClose(peer: a), from: r, addr: info(r).addr, now: 5) == [.circuitDown(peer: a, via: r)])
    #expect(t.cores[a]!.linkDown(r, settled: false, now: 5).contains(.circuitDown(peer: b, via: r)))
    #expect(!t.cores[r]!.relay.joins(a, b))
}

/// A relayed link's loss is no evidence about its peer (CI, stop 52: a killed relay closed the hard
/// pair's circuit, each end suspected the other at once, and with nobody to carry the refutation in
/// time both failed a live member). A direct link's loss still suspects at once.
@Test func aRelayedLinkThatClosesSuspectsNobodyButADirectLinkThatClosesDoes() {
    var t = Trio()
    _ = t.tick(a, now: 0)
    _ = t.tick(a, now: 2)
    for (x, y) in [(a, b), (b, a)] { _ = t.cores[x]!.linkUp(y, via: r, now: 3) }
    #expect(t.cores[a]!.path(to: b) == .relayed)
    _ = t.cores[a]!.linkDown(b, settled: true, now: 10)
    #expect(t.cores[a]!.swim.members[b]?.state == .alive, "the relayed peer is not suspected for its circuit's close")
    _ = t.cores[a]!.linkDown(r, settled: true, now: 10)
    #expect(t.cores[a]!.swim.members[r]?.state == .suspect, "the relay itself, linked directly, is")
}

@Test func swimGoesOverTheLinkToAMemberWhoseLinkComesFromAnotherHostThanItsAddress() {
    var t = Trio()
    let ping = SWIMMessage(sender: r, kind: .ping(seq: 1, target: a))
    let host = HostPort.numeric(info(a).addr)!.host
    _ = t.cores[r]!.linkAddresses(a, remote: "\(host):40000", local: info(r).addr, now: 1)
    if case .sendLink? = t.cores[r]!.datagram(ping, to: info(a).addr) { Issue.record("same host: a datagram") }
    _ = t.cores[r]!.linkAddresses(a, remote: "198.51.100.7:40000", local: info(r).addr, now: 2)
    #expect(t.cores[r]!.datagram(ping, to: info(a).addr) == .sendLink(a, .swim(ping)), "behind a NAT: over the link")
    _ = t.cores[r]!.linkDown(a, settled: false, now: 3)
    if case .sendLink? = t.cores[r]!.datagram(ping, to: info(a).addr) { Issue.record("no link: a datagram") }
}

@Test func aRelayOverItsBudgetRefusesCountsAndClosesAndTheEndsGoOn() {
    var none = Trio(relayBudget: .none)
    _ = none.tick(a, now: 0)
    let refused = none.tick(a, now: 3.5)
    #expect(circuitsUp(refused).isEmpty, "--no-relay: no circuit")
    #expect(none.cores[r]!.relay.refusals[.circuitsFull] == 1, "the refusal is counted")
    #expect(none.cores[a]!.routes.circuits[b] == nil, "A is free to ask another relay")

    var budget = RelayCircuits.Budget()
    budget.bytesPerSecond = 1000
    budget.burstBytes = 1000
    var t = Trio(relayBudget: budget)
    _ = t.tick(a, now: 0)
    _ = t.tick(a, now: 3.5)
    // Over the rate within a burst of debt: forwarded, and A's link is not read until it is paid.
    let paced = t.cores[r]!.receiveLink(.circuitData(peer: b, bytes: [UInt8](repeating: 1, count: 1500)), from: a, addr: info(a).addr, now: 4)
    #expect(paced == [.sendLink(b, .circuitData(peer: a, bytes: [UInt8](repeating: 1, count: 1500)))])
    #expect(t.cores[r]!.relay.readPause(for: a, queued: { _ in 0 }, now: 4) == 0.5)
    // Past a burst of debt (a reader that did not pause): refused.
    let over = t.cores[r]!.receiveLink(.circuitData(peer: b, bytes: [UInt8](repeating: 1, count: 600)), from: a, addr: info(a).addr, now: 4)
    #expect(over == [.sendLink(a, .circuitClose(peer: b)), .sendLink(b, .circuitClose(peer: a))], "a stream with a hole is no use: closed at both ends")
    #expect(t.cores[r]!.relay.refusals[.overBudget] == 1)
    // A queue at R beyond twice its budget (the pause did not hold) closes the circuit too.
    var q = Trio()
    _ = q.tick(a, now: 0)
    _ = q.tick(a, now: 3.5)
    let full = q.cores[r]!.receiveLink(.circuitData(peer: b, bytes: [1]), from: a, addr: info(a).addr, now: 4, queued: { _ in 1 << 30 })
    #expect(full.count == 2 && q.cores[r]!.relay.refusals[.queueFull] == 1)
    // An end whose link over the circuit ended tells the relay, once.
    #expect(q.cores[a]!.circuitEnded(b, via: r, now: 5) == [.sendLink(r, .circuitClose(peer: b))])
    #expect(q.cores[a]!.circuitEnded(b, via: r, now: 5).isEmpty)
}

/// Item 6, in the core: a relayed link over which nothing arrives is sent keepalives (time
/// requests, which any live peer answers), and after `stallAfter` of silence it is stalled: the
/// circuit is closed at the relay and at both ends (the shell ends the link over it), counted, and
/// the relay is not asked again for that peer at once. A link that is heard from is not stalled.
@Test func aRelayedLinkThatHearsNothingIsSentKeepalivesThenFoundStalledAndItsRelayLeft() {
    var t = Trio()
    _ = t.tick(a, now: 0.5)
    let up = circuitsUp(t.tick(a, now: 2))
    #expect(up[a] != nil)
    for (x, y) in [(a, b), (b, a)] { _ = t.cores[x]!.linkUp(y, via: r) }
    func isTimeRequest(_ e: (MemberID, SessionEffect), to peer: MemberID) -> Bool {
        if case .sendLink(peer, .timeRequest) = e.1 { return e.0 == a }
        return false
    }
    func isDown(_ e: (MemberID, SessionEffect), at x: MemberID, peer: MemberID) -> Bool {
        if case .circuitDown(peer, r) = e.1 { return e.0 == x }
        return false
    }
    // Heard from all along: never stalled.
    var now = 2.1
    var effects: [(MemberID, SessionEffect)] = []
    while now < 12 {
        _ = t.cores[a]!.receiveLink(.timeReply(echo: 0, wallMicros: 0), from: b, addr: info(b).addr, now: now)
        effects += t.tick(a, now: now)
        now += 0.5
    }
    #expect(!effects.contains { isDown($0, at: a, peer: b) } && t.cores[a]!.routes.stalls == 0)
    // Silent after the last heard (11.6): keepalives, then stalled six seconds later.
    effects = []
    while now < 17.5 {
        effects += t.tick(a, now: now)
        now += 0.5
    }
    #expect(effects.contains { isTimeRequest($0, to: b) }, "a keepalive to the quiet peer")
    #expect(!effects.contains { isDown($0, at: a, peer: b) }, "not yet")
    effects = t.tick(a, now: 17.7)
    #expect(effects.contains { isDown($0, at: a, peer: b) } && effects.contains { isDown($0, at: b, peer: a) }, "closed at both ends: \(effects)")
    #expect(!t.cores[r]!.relay.joins(a, b), "and at the relay")
    #expect(t.cores[a]!.routes.stalls == 1)
    #expect(t.cores[a]!.routes.failedRecently(b, via: r, within: 1, now: 17.8), "not asked again at once")
}

/// The shared shell's circuit ends (`SessionShell+Circuits`): an end that closes tells the core
/// once, so the relay hears `circuitClose` once; an end a newer one replaced, or one the core
/// closed itself, tells it nothing.
@Test func aCircuitEndThatClosesTellsTheCoreOnceAndAReplacedOrCoreClosedEndNever() throws {
    var t = Trio()
    _ = t.tick(a, now: 0.5)
    _ = t.tick(a, now: 1.9)
    let up = circuitsUp(t.tick(a, now: 2))
    try #require(up[a] != nil)
    #expect(up[a]! == (b, r, true))
    let shell = RecordingShell(core: t.cores[a]!)
    shell.now = 3
    let closes = { shell.sent.filter { if case .circuitClose(b) = $0.0 { $0.1 == r } else { false } }.count }

    // Two ends with B in a row: the first is replaced, and its close tells the core nothing.
    shell.perform([.circuitUp(peer: b, via: r, initiator: true), .circuitUp(peer: b, via: r, initiator: true)])
    let (old, current) = (shell.circuitsUp[0].serial, shell.circuitsUp[1].serial)
    #expect(old != current)
    shell.circuitEndClosed(peer: b, serial: old)
    #expect(closes() == 0, "a replaced end is not told back")
    shell.circuitEndClosed(peer: b, serial: current)
    #expect(closes() == 1, "the current end's close reaches the core, which tells the relay")
    shell.circuitEndClosed(peer: b, serial: current)
    #expect(closes() == 1, "once")

    // An end the core closes itself (`circuitDown`) is closed by the port and not told back.
    shell.perform([.circuitUp(peer: b, via: r, initiator: true)])
    let third = shell.circuitsUp[2].serial
    shell.perform([.circuitDown(peer: b, via: MemberID(raw: 9))])
    #expect(shell.circuitsDown.isEmpty, "another relay's circuit is not this end")
    shell.perform([.circuitDown(peer: b, via: r)])
    #expect(shell.circuitsDown.count == 1)
    shell.circuitEndClosed(peer: b, serial: third)
    #expect(closes() == 1)
}
