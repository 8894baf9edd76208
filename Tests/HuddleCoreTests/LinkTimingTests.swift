import HuddleCrypto
import Testing
@testable import HuddleCore

/// `LinkTiming` and the time exchange over links (issue 39): NTP's offset, the smoothed round
/// trip, the least-round-trip filter, which replies count, and wall times from a hostile peer.
@Suite struct LinkTimingTests {
    let peer = MemberID(raw: 2)

    /// One exchange with `peer`: asked at `now` (this member's wall clock `wall`), answered by a
    /// peer whose clock is `skew` ahead after `there` seconds, received `back` seconds later.
    func exchange(_ t: inout LinkTiming, now: Double, wall: Double, skew: Double, there: Double, back: Double) {
        let asked = t.requests(to: [peer], wall: wall, now: now, force: true)
        guard case let .timeRequest(echo)? = asked.first?.1 else {
            Issue.record("no request: \(asked)")
            return
        }
        let answered = LinkTiming.wallMicros(wall + there + skew)
        let taken = t.reply(from: peer, echo: echo, peerMicros: answered, wall: wall + there + back, now: now + there + back)
        #expect(taken)
    }

    @Test func theOffsetIsNTPs() {
        // Asked at 100 s, answered at the peer's 112.35 (its clock 12.3 s ahead, 50 ms there),
        // received at 100.1: ((112.35 − 100) + (112.35 − 100.1)) / 2 = 12.3.
        #expect(abs(LinkTiming.offset(sent: 100, answered: 112.35, received: 100.1) - 12.3) < 1e-9)
        // Behind: a negative offset.
        #expect(abs(LinkTiming.offset(sent: 100, answered: 95.05, received: 100.1) - -5) < 1e-9)
    }

    @Test func aSymmetricExchangeMeasuresTheSkewAndTheRoundTrip() throws {
        var t = LinkTiming()
        exchange(&t, now: 10, wall: 1_700_000_000, skew: 12.3, there: 0.02, back: 0.02)
        let e = try #require(t.estimates[peer])
        #expect(abs(e.skew - 12.3) < 1e-5)
        #expect(abs(e.roundTrip - 0.04) < 1e-9)
        #expect(abs(e.skewError - 0.02) < 1e-9)
        #expect(e.samples == 1 && abs(e.measuredAt - 10.04) < 1e-9)
        #expect(!t.isPending(peer))
    }

    @Test func theRoundTripIsSmoothedAsTCPsAndTheSkewComesFromTheLeastRoundTrip() throws {
        var t = LinkTiming()
        exchange(&t, now: 0, wall: 1000, skew: -3, there: 0.01, back: 0.01)      // 20 ms, exact
        exchange(&t, now: 10, wall: 1010, skew: -3, there: 0.19, back: 0.01)     // 200 ms, 90 ms off
        let e = try #require(t.estimates[peer])
        // SRTT = 7/8 · 0.02 + 1/8 · 0.2 (RFC 6298).
        #expect(abs(e.roundTrip - (0.875 * 0.02 + 0.125 * 0.2)) < 1e-9)
        // The skew of the 20 ms exchange, not of the queued one: within 1 µs (wall times are whole µs).
        #expect(abs(e.skew - -3) < 2e-6 && abs(e.skewError - 0.01) < 1e-9)
        // Past the window, the old exact sample is gone: the best of the last eight is taken.
        for i in 1...LinkTiming.window { exchange(&t, now: 10 + 10 * Double(i), wall: 1010 + 10 * Double(i), skew: -3, there: 0.1, back: 0.02) }
        let later = try #require(t.estimates[peer])
        #expect(abs(later.skew - (-3 + 0.04)) < 2e-6 && abs(later.skewError - 0.06) < 1e-9)
        #expect(later.samples == 2 + LinkTiming.window)
    }

    @Test func onlyTheReplyToThePendingRequestCounts() throws {
        var t = LinkTiming()
        let first = t.requests(to: [peer], wall: 50, now: 5)
        #expect(first.count == 1 && t.isPending(peer))
        // One at a time, and not again before the interval.
        #expect(t.requests(to: [peer], wall: 50.1, now: 5.1, force: true).isEmpty)
        guard case let .timeRequest(echo)? = first.first?.1 else { throw TimingTestError.noRequest }
        // Another echo (a guess, an old request) or another peer: nothing.
        let wrongEcho = t.reply(from: peer, echo: echo &+ 1, peerMicros: 1, wall: 50.2, now: 5.2)
        #expect(!wrongEcho)
        let fromAnother = t.reply(from: MemberID(raw: 3), echo: echo, peerMicros: 1, wall: 50.2, now: 5.2)
        #expect(!fromAnother)
        #expect(t.estimates.isEmpty && t.isPending(peer))
        // After the timeout the request is dropped and its reply no longer counts.
        let late = t.reply(from: peer, echo: echo, peerMicros: echo, wall: 50 + LinkTiming.timeout, now: 5 + LinkTiming.timeout)
        #expect(!late)
        #expect(t.requests(to: [peer], wall: 55 + LinkTiming.timeout, now: 5 + LinkTiming.interval).count == 1)
        // Due again only after the interval.
        var u = LinkTiming()
        _ = u.requests(to: [peer], wall: 0, now: 0)
        u.linkDown(peer, keep: true)
        #expect(u.requests(to: [peer], wall: 1, now: 1).count == 1, "a new link is asked at once")
        #expect(u.isPending(peer))
    }

    @Test func anEstimateOutlivesItsLinkOnlyForAMember() {
        var t = LinkTiming()
        exchange(&t, now: 0, wall: 10, skew: 1, there: 0.01, back: 0.01)
        t.linkDown(peer, keep: true)
        #expect(t.estimates[peer] != nil && !t.isPending(peer))
        t.forget(peer)
        #expect(t.estimates[peer] == nil)
    }

    @Test func hostileWallTimesNeitherTrapNorLeaveTheirRange() throws {
        // Decoding clamps: the largest u64 becomes the largest wall time taken.
        var w = [UInt8]([LinkMessage.version, 20]) + [UInt8](repeating: 0xff, count: 16)
        #expect(try LinkMessage.decode(w) == .timeReply(echo: LinkTiming.maximumWallMicros, wallMicros: LinkTiming.maximumWallMicros))
        w = [LinkMessage.version, 19] + [UInt8](repeating: 0xff, count: 8)
        #expect(try LinkMessage.decode(w) == .timeRequest(wallMicros: LinkTiming.maximumWallMicros))
        // Truncated or trailing bytes are decode errors, not traps.
        #expect(throws: CoreError.self) { try LinkMessage.decode([LinkMessage.version, 20] + [UInt8](repeating: 1, count: 15)) }
        #expect(throws: CoreError.self) { try LinkMessage.decode([LinkMessage.version, 19] + [UInt8](repeating: 1, count: 9)) }
        // This member's own clock, whatever it reads, becomes a wall time in range.
        for seconds in [-1.0, 0, .nan, .infinity, -.infinity, 1e300, Double(UInt64.max)] {
            #expect(LinkTiming.wallMicros(seconds) <= LinkTiming.maximumWallMicros)
        }
        // A peer at either end of the range: a finite skew, as large as it is.
        for (answer, sign) in [(UInt64.max, 1.0), (0, -1.0)] {
            var t = LinkTiming()
            guard case let .timeRequest(echo)? = t.requests(to: [peer], wall: 1_700_000_000, now: 1).first?.1 else { throw TimingTestError.noRequest }
            let taken = t.reply(from: peer, echo: echo, peerMicros: answer, wall: 1_700_000_000.001, now: 1.001)
            #expect(taken)
            let skew = try #require(t.estimates[peer]?.skew)
            #expect(skew.isFinite && skew * sign > 1e9)
        }
    }

    enum TimingTestError: Error { case noRequest }
}

/// The exchange between two session cores over their link: the core asks at its journal tick,
/// the peer answers from its wall clock, and the asker's estimate holds the skew.
@Suite struct SessionCoreTimingTests {
    static let a = MemberID(raw: 1), b = MemberID(raw: 2)
    static let identities = [a: Identity(seed: [UInt8](repeating: 1, count: 32)), b: Identity(seed: [UInt8](repeating: 2, count: 32))]

    static func info(_ id: MemberID) -> MemberInfo {
        MemberInfo(id: id, node: identities[id]!.publicKey, name: "\(id.raw)", addr: testAddr("m\(id.raw)")).signed(by: identities[id]!)
    }

    static func core(_ id: MemberID) -> SessionCore {
        SessionCore(local: info(id), identity: identities[id]!, joining: false, swimSeed: id.raw, journalSeed: id.raw)
    }

    static func timeMessages(_ effects: [SessionEffect], to peer: MemberID) -> [LinkMessage] {
        effects.compactMap {
            guard case let .sendLink(to, message) = $0, to == peer else { return nil }
            switch message {
            case .timeRequest, .timeReply: return message
            default: return nil
            }
        }
    }

    @Test func linkedCoresMeasureEachOthersClocks() throws {
        var x = Self.core(Self.a), y = Self.core(Self.b)
        _ = x.receivePushPull(SWIMPushPull(join: false, members: [Self.info(Self.b)]), from: testAddr("m2"), now: 1)
        _ = y.receivePushPull(SWIMPushPull(join: false, members: [Self.info(Self.a)]), from: testAddr("m1"), now: 1)
        _ = y.receiveLink(x.linkUp(Self.b), from: Self.a, addr: testAddr("m1"), now: 1)
        _ = x.receiveLink(y.linkUp(Self.a), from: Self.b, addr: testAddr("m2"), now: 1)
        // x's wall clock: 1_700_000_000 at its now 1; y's is 7.5 s ahead of it.
        x.setWallClock(1_700_000_000, now: 1)
        y.setWallClock(1_700_000_007.5, now: 1)
        let asked = Self.timeMessages(x.tick(now: 1), to: Self.b)
        #expect(asked.count == 1, "a new link is measured at the first tick")
        let request = try #require(asked.first)
        // 10 ms each way.
        let answered = Self.timeMessages(y.receiveLink(request, from: Self.a, addr: testAddr("m1"), now: 1.01), to: Self.a)
        let reply = try #require(answered.first)
        #expect(Self.timeMessages(x.receiveLink(reply, from: Self.b, addr: testAddr("m2"), now: 1.02), to: Self.b).isEmpty)
        let e = try #require(x.timing.estimates[Self.b])
        #expect(abs(e.skew - 7.5) < 1e-5 && abs(e.roundTrip - 0.02) < 1e-9)
        // Not again before the interval; then again; and at once when asked (`huddle doctor`).
        #expect(Self.timeMessages(x.tick(now: 2), to: Self.b).isEmpty)
        #expect(Self.timeMessages(x.tick(now: 1 + LinkTiming.interval), to: Self.b).count == 1)
        var z = Self.core(Self.a)
        #expect(z.measureLinks(now: 1).isEmpty, "no link, nobody asked")
        #expect(Self.timeMessages(y.measureLinks(now: 2), to: Self.a).count == 1)
        // A backlogged link's time requests are refused (the answer would measure the backlog).
        #expect(Self.timeMessages(y.receiveLink(request, from: Self.a, addr: testAddr("m1"), now: 3, backlogged: true), to: Self.a).isEmpty)
        // A closed link keeps a member's estimate (shown until the member fails or leaves).
        _ = x.linkDown(Self.b, settled: false, now: 30)
        #expect(x.timing.estimates[Self.b] != nil)
    }
}
