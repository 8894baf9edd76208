/// A relay member's circuits (issue 36, item 2; `SessionCore+Relay` runs it, the `circuit…` link
/// messages carry it): which member pairs it forwards opaque bytes between, within what budget.
///
/// A circuit joins two members A and B that both hold a link to this member and cannot link to
/// each other; this member forwards the A–B link's records as they are (ciphertext end to end: it
/// holds no key of the A–B link and sees only sizes and timing).
///
/// Guarantees (pure: time comes in as `now`):
/// - at most `Budget.circuitsPerMember` circuits touch any one member, at most
///   `Budget.circuits` in all; a request beyond either, for itself, for a pair already joined,
///   or from a member that is not linked, is refused and counted by reason (`refusals`);
/// - each member's forwarded bytes are paced by a token bucket of `Budget.bytesPerSecond` (burst
///   `Budget.burstBytes`) and by the queue at this member towards the circuit's other end: a member
///   over either is not read from for a while (`readPause`: the shell stops reading its link, so
///   TCP slows the sender, whose circuit end waits in turn) — a circuit over its budget slows its
///   sender, it is not closed. Closing a circuit for its rate lost the link over it and every
///   directed message queued on it (issue 36). Only what passes the pause anyway is refused
///   (dropped, counted; the caller closes that circuit, as a byte stream with a hole in it is of
///   no use to its ends): bytes that would take the bucket more than a burst into debt, or
///   bytes for a member for which twice `Budget.queueBytes` wait already (the shell says how
///   much: `queued`). So memory here does not grow with what a member sends. A full queue pauses
///   only the member whose circuit forwarded the most to that queue since it was last empty (the
///   one filling it): one circuit's flood does not slow another member's circuit;
/// - a circuit's accept is forwarded to the member that asked for it once, and only when it comes
///   from the member it was offered to (`accept`): accepts cost the relay nothing beyond that;
/// - a circuit that forwarded nothing for `Budget.idleSeconds` is closed by `tick`, and every
///   circuit of a member whose link closed is closed at once (`linkDown`);
/// - bytes are forwarded only on an open circuit, only to the other end of it.
public struct RelayCircuits: Sendable {
    /// How much this member relays (`--relay-limit`, `--no-relay` when wired in).
    public struct Budget: Sendable, Equatable {
        public var circuits = 64
        public var circuitsPerMember = 8
        public var bytesPerSecond = 1 << 20
        public var burstBytes = 4 << 20
        public var idleSeconds = 30.0
        /// Bytes queued for a circuit's receiving end beyond which nothing more is forwarded to it.
        public var queueBytes = 1 << 20
        public init() {}
        /// `--relay-limit`: `bytesPerSecond` per member, a burst of two seconds of it.
        public init(bytesPerSecond: Int) {
            self.bytesPerSecond = max(0, bytesPerSecond)
            burstBytes = self.bytesPerSecond.multipliedReportingOverflow(by: 2).overflow ? Int.max : self.bytesPerSecond * 2
        }
        /// Relays nothing.
        public static var none: Budget { var b = Budget(); b.circuits = 0; b.circuitsPerMember = 0; return b }
    }

    /// Why a circuit request or forwarded bytes were refused.
    public enum Refusal: String, Sendable, CaseIterable {
        case notLinked = "not_linked", ownCircuit = "own_circuit", duplicate, circuitsFull = "circuits_full"
        case memberCircuitsFull = "member_circuits_full", noCircuit = "no_circuit", overBudget = "over_budget"
        case queueFull = "queue_full"
    }

    /// An unordered member pair (the lower id first).
    public struct Pair: Hashable, Sendable {
        public let low: MemberID, high: MemberID
        public init(_ a: MemberID, _ b: MemberID) { (low, high) = a < b ? (a, b) : (b, a) }
        public func other(than m: MemberID) -> MemberID { m == low ? high : low }
        public func contains(_ m: MemberID) -> Bool { m == low || m == high }
    }

    public let local: MemberID
    public let budget: Budget
    /// Open circuits, with when each last forwarded bytes.
    public private(set) var circuits: [Pair: Double] = [:]
    /// Members this member holds a link to (only they may use a circuit).
    public private(set) var linked: Set<MemberID> = []
    /// Per open circuit, the member that asked for it; the circuits whose accept was forwarded.
    private var requesters: [Pair: MemberID] = [:]
    private var acceptedPairs: Set<Pair> = []
    /// Per receiving member, the bytes each circuit forwarded to it since its queue was last empty.
    private var backlog: [MemberID: [Pair: Int]] = [:]
    /// Per receiving member, the largest of those counts among circuits closed since (their bytes
    /// may still wait: the circuit left is not the one filling the queue for having outlived them).
    private var retiredShare: [MemberID: Int] = [:]
    /// Per member, its token bucket: tokens and when they were counted.
    private var buckets: [MemberID: (tokens: Double, at: Double)] = [:]
    public private(set) var refusals: [Refusal: Int] = [:]
    public private(set) var forwardedBytes = 0

    public init(local: MemberID, budget: Budget = Budget()) {
        self.local = local
        self.budget = budget
    }

    public mutating func linkUp(_ member: MemberID) { linked.insert(member) }

    /// `member`'s link closed: its circuits close; the other ends are returned (to be told).
    public mutating func linkDown(_ member: MemberID) -> [MemberID] {
        linked.remove(member)
        buckets[member] = nil
        let gone = circuits.keys.filter { $0.contains(member) }
        for pair in gone { remove(pair) }
        backlog[member] = nil
        retiredShare[member] = nil
        return gone.map { $0.other(than: member) }.sorted()
    }

    /// `from` asks for a circuit to `to`: nil when opened, else why not (counted).
    public mutating func open(from: MemberID, to: MemberID, now: Double) -> Refusal? {
        let refusal: Refusal?
        let pair = Pair(from, to)
        if from == local || to == local || from == to { refusal = .ownCircuit }
        else if !linked.contains(from) || !linked.contains(to) { refusal = .notLinked }
        else if circuits[pair] != nil { refusal = .duplicate }
        else if circuits.count >= budget.circuits { refusal = .circuitsFull }
        else if count(of: from) >= budget.circuitsPerMember || count(of: to) >= budget.circuitsPerMember { refusal = .memberCircuitsFull }
        else { refusal = nil }
        if let refusal { refusals[refusal, default: 0] &+= 1; return refusal }
        circuits[pair] = now
        requesters[pair] = from
        return nil
    }

    /// `from` accepts the circuit `to` asked it for: true (forward the accept to `to`) the first
    /// time only, and only from the member it was offered to.
    public mutating func accept(from: MemberID, to: MemberID) -> Bool {
        let pair = Pair(from, to)
        guard circuits[pair] != nil, requesters[pair] == to, !acceptedPairs.contains(pair) else { return false }
        acceptedPairs.insert(pair)
        return true
    }

    private mutating func remove(_ pair: Pair) {
        circuits[pair] = nil
        requesters[pair] = nil
        acceptedPairs.remove(pair)
        for end in [pair.low, pair.high] {
            guard let share = backlog[end]?.removeValue(forKey: pair) else { continue }
            retiredShare[end] = max(retiredShare[end] ?? 0, share)
        }
    }

    private func count(of member: MemberID) -> Int { circuits.keys.count { $0.contains(member) } }

    /// Closes the circuit between `a` and `b`; whether there was one.
    public mutating func close(_ a: MemberID, _ b: MemberID) -> Bool {
        let pair = Pair(a, b)
        guard circuits[pair] != nil else { return false }
        remove(pair)
        return true
    }

    /// Whether a circuit joins `a` and `b`.
    public func joins(_ a: MemberID, _ b: MemberID) -> Bool { a != b && circuits[Pair(a, b)] != nil }

    /// `bytes` bytes from `from` for `to`, while `queued` bytes wait for `to` already: the member to
    /// forward them to, or why they are dropped.
    public mutating func forward(_ bytes: Int, from: MemberID, to: MemberID, queued: Int = 0, now: Double) -> Result<MemberID, CoreError> {
        let pair = Pair(from, to)
        guard from != to, circuits[pair] != nil else { return .failure(refuse(.noCircuit)) }
        if queued <= 0 { backlog[to] = nil; retiredShare[to] = nil }
        // Past twice the queue budget the pause (`readPause`) did not hold the sender back: refused.
        let hard = budget.queueBytes > Int.max / 2 ? Int.max : budget.queueBytes * 2
        if queued >= hard { return .failure(refuse(.queueFull)) }
        let burst = Double(budget.burstBytes)
        let tokens = self.tokens(of: from, now: now)
        let n = Double(max(0, bytes))
        // The bucket may go into debt (the reader pauses until it is paid), by at most a burst.
        guard tokens - n >= -burst else {
            buckets[from] = (tokens, now)
            return .failure(refuse(.overBudget))
        }
        buckets[from] = (tokens - n, now)
        circuits[pair] = now
        backlog[to, default: [:]][pair, default: 0] &+= max(0, bytes)
        forwardedBytes = forwardedBytes &+ max(0, bytes)
        return .success(to)
    }

    /// `member`'s tokens at `now` (a full burst for a member not counted yet).
    private func tokens(of member: MemberID, now: Double) -> Double {
        let rate = Double(budget.bytesPerSecond), burst = Double(budget.burstBytes)
        guard let bucket = buckets[member] else { return burst }
        return min(burst, bucket.tokens + max(0, now - bucket.at) * rate)
    }

    /// How long the shell should wait before reading more from `member`'s link (nil: read on):
    /// until its bucket is out of debt, or, while a queue its circuit fills holds
    /// `Budget.queueBytes` or more (`queued`), a short while (`queuePause`) before looking again.
    public func readPause(for member: MemberID, queued: (MemberID) -> Int, now: Double) -> Double? {
        guard buckets[member] != nil || !circuits.isEmpty else { return nil }
        let tokens = tokens(of: member, now: now)
        if tokens < 0 {
            let rate = Double(budget.bytesPerSecond)
            return rate > 0 ? -tokens / rate : Self.queuePause
        }
        for pair in circuits.keys where pair.contains(member) {
            let to = pair.other(than: member)
            let waiting = queued(to)
            guard waiting >= budget.queueBytes else { continue }
            let shares = backlog[to] ?? [:]
            if (shares[pair] ?? 0) >= max(shares.values.max() ?? 0, retiredShare[to] ?? 0) { return Self.queuePause }
        }
        return nil
    }

    /// How long a reader waits before looking at a full queue again.
    public static let queuePause = 0.01

    /// Counts a refusal and makes it the error of `forward`'s result (`CoreError.Code.relayRefused`).
    private mutating func refuse(_ reason: Refusal) -> CoreError {
        refusals[reason, default: 0] &+= 1
        return .relayRefused(reason)
    }

    /// Closes circuits idle for `budget.idleSeconds`; returns them.
    public mutating func tick(now: Double) -> [Pair] {
        let idle = circuits.filter { now - $0.value >= budget.idleSeconds }.map(\.key)
        for pair in idle { remove(pair) }
        return idle.sorted { ($0.low, $0.high) < ($1.low, $1.high) }
    }
}
