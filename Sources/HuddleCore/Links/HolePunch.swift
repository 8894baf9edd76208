/// Hole punching between two members whose link runs through a relay (issue 36, item 3),
/// coordinated over that relayed link as libp2p's DCUtR does: the lower member id starts an
/// attempt (`connect`), the other answers (`reply`), the starter measures the round trip over the
/// relay, says `sync` and dials half a round trip later, while the other dials as soon as `sync`
/// arrives; so both ends' first packets leave at about the same moment (the shell dials from the
/// listening port: a TCP simultaneous open through both NATs). The direct link that comes up
/// replaces the relayed one (`LinkPlanner.keepsNewLink`). `SessionCore+Punch` runs it.
///
/// Guarantees (pure: time comes in as `now`):
/// - an attempt is started only while the pair's link is relayed and the starter has addresses of
///   its own to offer (a mapping that serves anyone: an `easy` NAT's, signed or tentative); the
///   other end answers only when it has some too, and the starter dials only when the answer
///   brought (or the peer's record offers) one: a pair with a `hard` NAT, or one not classified
///   yet, makes no dial;
/// - a member dials only addresses the peer itself gave: its signed `reach` and the addresses its
///   own `connect` or `reply` of the pair's current attempts offered (`offered`, over the pair's
///   end-to-end link; at most `MemberInfo.maximumReach` kept), at most `Settings.candidates` of
///   them: what another member says never makes it dial an address;
/// - a `connect` that arrives before this end has an address to offer is not lost: it is answered
///   as soon as one appears, within `Settings.lateAnswer` (the starter waits `attemptTimeout` for
///   the reply), instead of failing the attempt and waiting out its timeout and backoff;
/// - at most `Settings.attempts` attempts per pair and set of addresses, `Settings.backoff`
///   doubling after each failed one; an attempt fails when its reply does not come or no direct
///   link is up `Settings.attemptTimeout` after it; a change of either member's addresses starts
///   the count over (retry when addresses change);
/// - a dial's token is taken when the attempt starts (the starter's `connect`) or is answered (the
///   other end's `reply`), so neither end commits to an attempt it has no dial left for — an end
///   whose budget ran out waits for a token (an answer within `lateAnswer`) instead of leaving
///   the other end to dial alone;
/// - whatever the records and messages say, this member dials a peer at most `Settings.dialBurst`
///   times plus one per `Settings.dialRefill` seconds — a budget that outlives the peer failing,
///   leaving or refuting (`forget` keeps what it spent) — and all peers together at most
///   `Settings.nodeDialBurst` times plus one per `Settings.nodeDialRefill` seconds (many members
///   cannot add their budgets up to aim this member's dials at one host), and answers a `connect` at most once per
///   `Settings.answerInterval`; `punch` messages beyond that, out of turn (a step not expected,
///   a stale attempt, the wrong end starting) or over a link that is not relayed are refused and
///   counted (`refused`), never answered;
/// - memory: one entry per peer that a relayed link or a punch message named (relayed links are
///   bounded by the member table), kept after `forget` only while its dial budget refills (so at
///   most about the node-wide dials of `dialBurst` × `dialRefill` seconds more);
/// - counters: `attempts` (dials this member made), `successes` (a direct link came up while an
///   attempt of its was out).
public struct HolePunch: Sendable {
    public struct Settings: Sendable, Equatable {
        public var attempts = 3
        public var attemptTimeout = 4.0
        public var backoff = 1.0
        public var candidates = 2
        public var dialBurst = 4.0
        public var dialRefill = 15.0
        public var answerInterval = 0.5
        /// Seconds after a `connect` within which it is still answered once this end has an
        /// address to offer (less than `attemptTimeout`: the starter still waits for it).
        public var lateAnswer = 2.0
        public var nodeDialBurst = 8.0
        public var nodeDialRefill = 2.0
        public init() {}
    }

    /// The three messages of an attempt (`LinkMessage.punch`).
    public enum Step: UInt8, Sendable, CaseIterable {
        /// The starter (lower id) opens attempt N; the answer measures the relayed round trip.
        case connect = 0
        /// The other end answers: it will dial at `sync`.
        case reply = 1
        /// The starter says dial now (it dials half a round trip later).
        case sync = 2
    }

    /// What the shell is to do.
    public enum Effect: Sendable, Equatable {
        /// Send `punch(attempt, step)` to `peer` over its (relayed) link.
        case send(MemberID, attempt: UInt32, step: Step)
        /// Dial `addrs` from the listening port; `initiator`: this member starts the link handshake.
        case dial(MemberID, addrs: [String], initiator: Bool)
    }

    /// One peer's punching.
    struct Pair: Sendable {
        /// This member's and the peer's addresses the count of attempts is for.
        var addresses: [String] = []
        var attempts = 0
        var nextAt = -Double.infinity
        /// The starter's `connect` out, not answered yet.
        var asked: (attempt: UInt32, at: Double)?
        /// The starter's dial, due at this time.
        var dialAt: Double?
        /// A dial made, waiting for the direct link.
        var dialedAt: Double?
        /// The answering end's attempt waiting for its `sync`.
        var answered: UInt32?
        /// A `connect` this end could not answer yet (no address of its own to offer), and when.
        var pending: (attempt: UInt32, at: Double)?
        /// The addresses the peer offered in its latest `connect` or `reply` (its own word, over
        /// the pair's end-to-end link), dialed with its signed ones.
        var offered: [String] = []
        var answeredAt = -Double.infinity
        /// Highest attempt number used or answered (a repeated or older one is refused).
        var lastAttempt: UInt32 = 0
        /// The dial budget: tokens, as of `tokensAt`.
        var tokens: Double
        var tokensAt: Double

        var busy: Bool { asked != nil || dialAt != nil || dialedAt != nil }
    }

    public let local: MemberID
    public var settings = Settings()
    var pairs: [MemberID: Pair] = [:]
    public private(set) var attempts = 0
    public private(set) var successes = 0
    public private(set) var refused = 0
    /// The node-wide dial budget: tokens, as of `nodeTokensAt` (full at the start).
    private var nodeTokens: Double?
    private var nodeTokensAt = -Double.infinity

    public init(local: MemberID) { self.local = local }

    /// Whether this member starts attempts with `peer` (the lower id does).
    public func starts(with peer: MemberID) -> Bool { local < peer }

    /// Whether an attempt with `peer` is out (asked, due to dial, or dialed and waiting).
    public func inProgress(_ peer: MemberID) -> Bool { pairs[peer]?.busy ?? false }

    private func fresh(_ now: Double) -> Pair { Pair(tokens: settings.dialBurst, tokensAt: now) }

    /// What to dial at a peer: its signed addresses, then those it offered, distinct, at most `candidates`.
    private func candidates(signed: [String], offered: [String]) -> [String] {
        var out: [String] = []
        for addr in signed + offered where !out.contains(addr) { out.append(addr) }
        return Array(out.prefix(settings.candidates))
    }

    /// `tokens` as of `at`, refilled up to `now`: one per `refill` seconds, at most `burst`.
    private static func refilled(_ tokens: Double, at: Double, now: Double, burst: Double, refill: Double) -> Double {
        let gained = refill > 0 && now > at ? (now - at) / refill : 0
        return min(burst, tokens + gained)
    }

    /// Takes a dial token from `pair` and from the node's budget: false when either has none left.
    private mutating func spend(_ pair: inout Pair, now: Double) -> Bool {
        pair.tokens = Self.refilled(pair.tokens, at: pair.tokensAt, now: now, burst: settings.dialBurst, refill: settings.dialRefill)
        pair.tokensAt = now
        let node = Self.refilled(nodeTokens ?? settings.nodeDialBurst, at: nodeTokensAt, now: now, burst: settings.nodeDialBurst,
                                 refill: settings.nodeDialRefill)
        nodeTokens = node
        nodeTokensAt = now
        guard pair.tokens >= 1, node >= 1 else { return false }
        pair.tokens -= 1
        nodeTokens = node - 1
        return true
    }

    /// What is due at `now`. `relayed`: the peers whose link runs through a relay, each with its
    /// signed record's reach addresses; `own`: the addresses this member offers (its record's
    /// reach addresses and a tentative one, `SessionCore.punchAddresses`).
    public mutating func tick(relayed: [MemberID: [String]], own: [String], now: Double) -> [Effect] {
        var out: [Effect] = []
        // A forgotten peer's entry, not relayed, whose dial budget is whole again: nothing left to keep.
        pairs = pairs.filter { peer, p in
            relayed[peer] != nil || p.busy
                || Self.refilled(p.tokens, at: p.tokensAt, now: now, burst: settings.dialBurst, refill: settings.dialRefill) < settings.dialBurst
        }
        // A pair no longer relayed (direct, or no link): its attempt is over, unanswered.
        for (peer, p) in pairs where p.busy && relayed[peer] == nil {
            pairs[peer]?.asked = nil
            pairs[peer]?.dialAt = nil
            pairs[peer]?.dialedAt = nil
        }
        for (peer, p) in pairs where p.pending != nil && relayed[peer] == nil { pairs[peer]?.pending = nil }
        for peer in relayed.keys.sorted() where peer != local {
            var p = pairs[peer] ?? fresh(now)
            let signed = Array((relayed[peer] ?? []).prefix(settings.candidates))
            let addresses = own.sorted() + ["|"] + signed
            if p.addresses != addresses {
                // New addresses on either side: the count starts over.
                p.addresses = addresses
                p.attempts = 0
                p.nextAt = now
                p.asked = nil
                p.dialAt = nil
                p.dialedAt = nil
            }
            if let asked = p.asked, now - asked.at >= settings.attemptTimeout { failed(&p, now: now) }
            if let at = p.dialedAt, now - at >= settings.attemptTimeout { failed(&p, now: now) }
            let dialable = candidates(signed: signed, offered: p.offered)
            if let at = p.dialAt, now >= at {
                // Its dial token was taken when the attempt started.
                p.dialAt = nil
                p.dialedAt = now
                attempts &+= 1
                out.append(.dial(peer, addrs: dialable, initiator: true))
            }
            // A `connect` that came before this end had an address to offer: answered now, if still in time.
            if let pending = p.pending, now - pending.at > settings.lateAnswer { p.pending = nil }
            if !starts(with: peer), let pending = p.pending, !own.isEmpty, !dialable.isEmpty, spend(&p, now: now) {
                p.pending = nil
                p.answered = pending.attempt
                out.append(.send(peer, attempt: pending.attempt, step: .reply))
            }
            if starts(with: peer), !p.busy, !own.isEmpty, p.attempts < settings.attempts, now >= p.nextAt,
               p.lastAttempt < UInt32.max, spend(&p, now: now) {
                p.lastAttempt += 1
                p.attempts += 1
                p.asked = (p.lastAttempt, now)
                out.append(.send(peer, attempt: p.lastAttempt, step: .connect))
            }
            pairs[peer] = p
        }
        return out
    }

    /// An attempt that brought no direct link: the next waits `backoff` × 2^(attempts − 1).
    private func failed(_ p: inout Pair, now: Double) {
        p.asked = nil
        p.dialAt = nil
        p.dialedAt = nil
        p.nextAt = now + settings.backoff * Double(1 << min(max(p.attempts - 1, 0), 16))
    }

    /// `punch(attempt, step)` from `peer`. `peerAddresses`: its signed record's reach addresses
    /// while its link is relayed, nil when it is not (nothing is punched then); `offered`: the
    /// addresses the step itself carries (with `connect` and `reply`); `own`: the addresses this
    /// member offers (none: its NAT is `hard` or unknown, and it answers no `connect` until it has
    /// one — a pair is dialed only when both ends offer an address).
    public mutating func receive(_ step: Step, attempt: UInt32, from peer: MemberID, peerAddresses: [String]?, offered: [String] = [],
                                 own: [String], now: Double) -> [Effect] {
        guard peer != local, let peerAddresses else { return refuse() }
        let offered = Array(offered.prefix(MemberInfo.maximumReach))
        var p = pairs[peer] ?? fresh(now)
        defer { pairs[peer] = p }
        switch step {
        case .connect:
            guard !starts(with: peer), attempt > p.lastAttempt, now - p.answeredAt >= settings.answerInterval else { return refuse() }
            p.lastAttempt = attempt
            p.answeredAt = now
            p.offered = offered
            p.answered = nil
            p.pending = nil
            // Nothing to dial (the peer offers no address): no answer, the attempt times out.
            guard !candidates(signed: peerAddresses, offered: offered).isEmpty else { return [] }
            // This end has nothing to offer yet (not classified, or a `hard` NAT whose mapping
            // serves one destination), or no dial left in its budgets: answered by `tick` should
            // an address or a dial token appear in time.
            guard !own.isEmpty, spend(&p, now: now) else {
                p.pending = (attempt, now)
                return []
            }
            p.answered = attempt
            return [.send(peer, attempt: attempt, step: .reply)]
        case .reply:
            guard starts(with: peer), let asked = p.asked, asked.attempt == attempt else { return refuse() }
            p.asked = nil
            p.offered = offered
            // The peer offers nothing to dial: this attempt ends here, without a dial.
            guard !candidates(signed: peerAddresses, offered: offered).isEmpty else {
                failed(&p, now: now)
                return []
            }
            // Half the relayed round trip: the `sync` takes about that long to reach the peer.
            p.dialAt = now + max(0, now - asked.at) / 2
            return [.send(peer, attempt: attempt, step: .sync)]
        case .sync:
            guard !starts(with: peer), p.answered == attempt else { return refuse() }
            p.answered = nil
            // Its dial token was taken when this end answered.
            p.dialedAt = now
            attempts &+= 1
            return [.dial(peer, addrs: candidates(signed: peerAddresses, offered: p.offered), initiator: false)]
        }
    }

    private mutating func refuse() -> [Effect] {
        refused &+= 1
        return []
    }

    /// A link to `peer` came up; `direct`: not through a relay. A direct one while an attempt was
    /// out is a success; either way the attempts start over should the pair be relayed again.
    public mutating func linkUp(_ peer: MemberID, direct: Bool) {
        guard direct, var p = pairs[peer] else { return }
        if p.busy { successes &+= 1 }
        p.addresses = []
        p.asked = nil
        p.dialAt = nil
        p.dialedAt = nil
        p.answered = nil
        p.pending = nil
        p.offered = []
        pairs[peer] = p
    }

    /// `peer` failed, left or was removed: its attempts are over, its dial budget stays spent.
    public mutating func forget(_ peer: MemberID) {
        guard let old = pairs[peer] else { return }
        var p = fresh(old.tokensAt)
        p.tokens = old.tokens
        pairs[peer] = p
    }

    /// Whether `tick` with no relayed peer would change nothing (no pair is kept).
    public var isIdle: Bool { pairs.isEmpty }

    /// When `tick` next has work of its own: a dial due, an attempt timing out.
    public var nextDeadline: Double {
        var next = Double.infinity
        for p in pairs.values {
            if let at = p.dialAt { next = min(next, at) }
            if let asked = p.asked { next = min(next, asked.at + settings.attemptTimeout) }
            if let at = p.dialedAt { next = min(next, at + settings.attemptTimeout) }
        }
        return next
    }
}
