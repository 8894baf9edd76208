/// Round-trip times and clock skew of linked members (`LinkTiming`), from time exchanges over their
/// links: the core asks (every `LinkTiming.interval`, at the first journal tick after a link is up,
/// and when the shell asks for a fresh measurement), answers, and measures; the shell shows the
/// estimates (`diagnose`, `members`) and sends what it is told.
extension SessionCore {
    /// This member's wall clock at `now`, in seconds since 1970 (`setWallClock`).
    func wallClock(_ now: Double) -> Double { now + wallClockOffset }

    /// Time requests due at `now` on the links to `linked`.
    mutating func timingTick(_ linked: [MemberID], now: Double) -> [SessionEffect] {
        timing.requests(to: linked, wall: wallClock(now), now: now).map { .sendLink($0.0, $0.1) }
    }

    /// A time request to every linked live member that has none pending, now (`huddle doctor`).
    public mutating func measureLinks(now: Double) -> [SessionEffect] {
        timing.requests(to: linkedLive, wall: wallClock(now), now: now, force: true).map { .sendLink($0.0, $0.1) }
    }

    /// A peer's time request, answered with this member's wall clock.
    func answerTimeRequest(_ wallMicros: UInt64, from peer: MemberID, now: Double) -> [SessionEffect] {
        [.sendLink(peer, .timeReply(echo: wallMicros, wallMicros: LinkTiming.wallMicros(wallClock(now))))]
    }

    /// A peer's answer to this member's time request: a sample when it answers the pending one.
    mutating func receiveTimeReply(echo: UInt64, wallMicros: UInt64, from peer: MemberID, now: Double) -> [SessionEffect] {
        timing.reply(from: peer, echo: echo, peerMicros: wallMicros, wall: wallClock(now), now: now)
        return []
    }
}
