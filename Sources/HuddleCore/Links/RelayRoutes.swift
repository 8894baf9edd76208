/// This member's circuits as an end (issue 36, item 2): when to ask a relay for a circuit to a
/// member it cannot link to directly, which relay, and which offered circuits to take.
/// (`RelayCircuits` is the relay's side.)
///
/// Guarantees (pure: time comes in as `now`):
/// - a live member without a link is asked for through a relay only after `Settings.directGrace`
///   seconds without one (the direct dials go first), the higher of the two member ids
///   `Settings.higherIdDelay` later still (the lower one's circuit usually comes first);
/// - at most one circuit (asked for or open) per peer; a request unanswered for
///   `Settings.requestTimeout` is dropped; a relay that refused, timed out, stalled or whose
///   circuit closed is not asked again for that peer for `Settings.retryAfter` while another is
///   untried: relays are tried in member order, one not tried for the longest first; a peer that
///   fails and comes back does not wipe that record (`forget` keeps it: a relay that stalled a
///   pair is not chosen again at once because the stall made the peer look failed), which is
///   dropped `Settings.failureMemory` seconds after the failure (memory: one entry per peer and
///   relay that failed within that time);
/// - an open circuit's link that this member hears nothing from for `Settings.keepalive` seconds is
///   due a keepalive (the shell's time request: answered by any live peer), and one silent for
///   `Settings.stallAfter` seconds is stalled (`stalled`): a relay that drops or holds what it
///   forwards is noticed even when it keeps the circuit open;
/// - a relay is a member this member holds a direct link to (never the peer, never one reached
///   itself through a relay);
/// - an offered circuit is taken only from a live member without a link here and without a circuit
///   already open, through a direct link, and not through a relay that failed this pair within
///   half of `Settings.retryAfter`; one this member asked for is taken only from the relay it
///   asked; while its own request is out, an offer through another relay is taken only from a
///   lower member id (whose circuit is the one both ends keep), never in place of its own
///   request otherwise: an unsolicited offer does not replace a pending request;
/// - a relay's link closing closes every circuit through it.
public struct RelayRoutes: Sendable {
    public struct Settings: Sendable, Equatable {
        /// Direct dials go first; a suspected member is failed within seconds (SWIM's suspicion
        /// timeout is 2.5 to 7.5 s), so a relayed link must come sooner than that.
        public var directGrace = 1.5
        public var higherIdDelay = 1.5
        public var requestTimeout = 5.0
        public var retryAfter = 2.0
        /// How long a relay's failure for a peer is remembered.
        public var failureMemory = 60.0
        /// Silence on a relayed link after which a keepalive is asked for, and after which the
        /// link counts as stalled (its relay drops or holds what it forwards).
        public var keepalive = 1.0
        public var stallAfter = 6.0
        public init() {}
    }

    /// A circuit of this member's, by its other end.
    public enum Circuit: Sendable, Equatable {
        /// Asked of `via` at `at`, not answered yet.
        case requested(via: MemberID, at: Double)
        /// Open through `via`; `initiator`: this member asked (it starts the link's handshake).
        case open(via: MemberID, initiator: Bool)

        public var via: MemberID {
            switch self { case let .requested(via, _), let .open(via, _): via }
        }
    }

    /// Ask `via` for a circuit to `peer`.
    public struct Request: Sendable, Equatable {
        public let peer: MemberID
        public let via: MemberID
    }

    public let local: MemberID
    public var settings = Settings()
    public private(set) var circuits: [MemberID: Circuit] = [:]
    /// Per peer, since when it has been live without a link.
    private var unlinkedSince: [MemberID: Double] = [:]
    /// Per peer, the relays that failed it and when.
    private var failed: [MemberID: [MemberID: Double]] = [:]
    /// The time of the oldest entry of `failed`: the table is looked through only once it is
    /// `Settings.failureMemory` old, not at every tick.
    private var failedOldest = Double.infinity
    /// Per peer with an open circuit whose link is up, when anything was last heard over it.
    private var heardAt: [MemberID: Double] = [:]
    /// Relayed links found stalled (counted).
    public private(set) var stalls = 0

    public init(local: MemberID) { self.local = local }

    /// The relay of the open circuit to `peer`, if any.
    public func via(_ peer: MemberID) -> MemberID? {
        if case let .open(via, _)? = circuits[peer] { return via }
        return nil
    }

    /// Whether `tick` with no unlinked member would change nothing: no member waits unlinked, no
    /// failure is remembered and no circuit is asked for or up.
    public var isIdle: Bool { unlinkedSince.isEmpty && failed.isEmpty && circuits.isEmpty }

    /// Requests due at `now`. `unlinked`: live members without a link; `relays`: members this
    /// member holds a direct link to.
    public mutating func tick(unlinked: Set<MemberID>, relays: Set<MemberID>, now: Double, limit: Int = .max) -> [Request] {
        // Tables are rebuilt only when something leaves them (rebuilding, or writing while
        // iterating, copied them at every tick).
        if unlinkedSince.keys.contains(where: { !unlinked.contains($0) }) {
            unlinkedSince = unlinkedSince.filter { unlinked.contains($0.key) }
        }
        let memory = settings.failureMemory
        if now - failedOldest >= memory {
            failed = failed.compactMapValues { relays in
                let kept = relays.filter { now - $0.value < memory }
                return kept.isEmpty ? nil : kept
            }
            failedOldest = failed.values.reduce(Double.infinity) { oldest, relays in relays.values.reduce(oldest, min) }
        }
        for peer in unlinked where unlinkedSince[peer] == nil { unlinkedSince[peer] = now }
        for (peer, circuit) in circuits {
            guard case let .requested(via, at) = circuit, now - at >= settings.requestTimeout else { continue }
            fail(peer, via: via, now: now)
        }
        var out: [Request] = []
        // At most `limit` requests: a peer past it is not recorded as asked (it is asked at a later tick).
        for peer in unlinked.sorted() where peer != local && circuits[peer] == nil {
            guard out.count < limit else { break }
            let grace = settings.directGrace + (local < peer ? 0 : settings.higherIdDelay)
            guard let since = unlinkedSince[peer], now - since >= grace,
                  let via = choose(for: peer, among: relays, now: now) else { continue }
            circuits[peer] = .requested(via: via, at: now)
            out.append(Request(peer: peer, via: via))
        }
        return out
    }

    /// The relay to ask for `peer`: one never failed, else the one failed longest ago if that is
    /// `retryAfter` ago; member order among equals.
    /// One pass, no sort: it runs for every unlinked member at every tick.
    private func choose(for peer: MemberID, among relays: Set<MemberID>, now: Double) -> MemberID? {
        let failures = failed[peer] ?? [:]
        var fresh: MemberID?
        var oldest: (at: Double, relay: MemberID)?
        for relay in relays where relay != peer && relay != local && via(relay) == nil {
            if let at = failures[relay] {
                if oldest.map({ (at, relay) < ($0.at, $0.relay) }) ?? true { oldest = (at, relay) }
            } else if fresh.map({ relay < $0 }) ?? true {
                fresh = relay
            }
        }
        if let fresh { return fresh }
        guard let oldest, now - oldest.at >= settings.retryAfter else { return nil }
        return oldest.relay
    }

    private mutating func fail(_ peer: MemberID, via: MemberID, now: Double) {
        circuits[peer] = nil
        heardAt[peer] = nil
        failed[peer, default: [:]][via] = now
        failedOldest = min(failedOldest, now)
    }

    /// Whether `via` failed the circuit to `peer` less than `seconds` ago.
    public func failedRecently(_ peer: MemberID, via: MemberID, within seconds: Double, now: Double) -> Bool {
        guard let at = failed[peer]?[via] else { return false }
        return now - at < seconds
    }

    /// `via` says the circuit to `peer` this member asked for is taken: true when it was asked of
    /// `via` (it is open now, and this member starts the link's handshake).
    public mutating func accepted(_ peer: MemberID, via: MemberID) -> Bool {
        guard case .requested(via, _)? = circuits[peer] else { return false }
        circuits[peer] = .open(via: via, initiator: true)
        return true
    }

    /// `via` offers a circuit from `peer`: whether to take it (it is open then). `linked`: this
    /// member has a link to `peer`; `live`: `peer` is a live member; `direct`: `via` is linked directly.
    public mutating func offered(_ peer: MemberID, via: MemberID, linked: Bool, live: Bool, direct: Bool, now: Double) -> Bool {
        guard peer != local, via != peer, live, direct, !linked else { return false }
        guard !failedRecently(peer, via: via, within: settings.retryAfter / 2, now: now) else { return false }
        switch circuits[peer] {
        case .open?: return false
        case let .requested(asked, _)? where asked != via && local < peer:
            // Its own request is out through another relay, and this member's circuit is the one kept.
            return false
        default: break
        }
        circuits[peer] = .open(via: via, initiator: false)
        return true
    }

    /// `via` refused the circuit to `peer` this member asked for (an open one stays: a refusal
    /// answers a request, and a duplicate request may be refused after an offer was taken).
    public mutating func refused(_ peer: MemberID, via: MemberID, now: Double) {
        guard case .requested(via, _)? = circuits[peer] else { return }
        fail(peer, via: via, now: now)
    }

    /// The circuit to `peer` through `via` was closed (by the relay, the other end, or
    /// the link over it ending): whether one was open (its link is to be torn down).
    @discardableResult
    public mutating func closed(_ peer: MemberID, via: MemberID, now: Double) -> Bool {
        guard let circuit = circuits[peer], circuit.via == via else { return false }
        fail(peer, via: via, now: now)
        if case .open = circuit { return true }
        return false
    }

    /// The link to `member` closed: the circuits through it are gone; returns the open ones' peers.
    public mutating func linkDown(_ member: MemberID, now: Double) -> [MemberID] {
        var open: [MemberID] = []
        for (peer, circuit) in circuits.sorted(by: { $0.key < $1.key }) where circuit.via == member {
            if case .open = circuit { open.append(peer) }
            fail(peer, via: member, now: now)
        }
        return open
    }

    /// `peer` failed or left: nothing more is asked for it (an open circuit is closed by its link).
    /// The relays that failed it are still remembered (a pair stalled by its relay may look failed).
    public mutating func forget(_ peer: MemberID) {
        unlinkedSince[peer] = nil
        if case .requested? = circuits[peer] { circuits[peer] = nil }
    }

    // MARK: stalls

    /// Something arrived over the link to `peer`: while it runs over an open circuit, it is not silent.
    public mutating func heard(_ peer: MemberID, now: Double) {
        guard heardAt[peer] != nil else { return }
        heardAt[peer] = now
    }

    /// Which open circuits' links are due a keepalive, and which are stalled, at `now`. `relayed`:
    /// the peers whose link runs over a circuit now (each starts being watched at the first call
    /// that names it). A stalled circuit is closed here, its relay failed for the peer (counted in
    /// `stalls`); the caller tells the relay and ends the link over it.
    public mutating func silence(relayed: [MemberID: MemberID], now: Double) -> (keepalive: [MemberID], stalled: [Request]) {
        heardAt = heardAt.filter { relayed[$0.key] != nil }
        var keepalive: [MemberID] = [], stalled: [Request] = []
        for (peer, via) in relayed.sorted(by: { $0.key < $1.key }) {
            guard case .open(via, _)? = circuits[peer] else { continue }
            guard let at = heardAt[peer] else { heardAt[peer] = now; continue }
            if now - at >= settings.stallAfter {
                fail(peer, via: via, now: now)
                stalls &+= 1
                stalled.append(Request(peer: peer, via: via))
            } else if now - at >= settings.keepalive {
                keepalive.append(peer)
            }
        }
        return (keepalive, stalled)
    }
}
