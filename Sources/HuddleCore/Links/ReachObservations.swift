/// How this member's traffic looks from outside: a NAT, or none (issue 36, item 1).
public enum NATKind: String, Sendable, Equatable, CaseIterable {
    /// Members see this member's traffic come from its own address: nothing translates it.
    case none
    /// One mapping towards every member (endpoint-independent, or port-preserving): a peer that
    /// learns it can reach this member there once this member has sent to it.
    case easy
    /// A different mapping (port) per member (endpoint-dependent): only a relay, or a punch that
    /// guesses the port, reaches this member.
    case hard
    /// Too few reports, or reports that do not agree.
    case unknown
}

/// Where a peer sees this member's traffic come from, as it reported over its link
/// (`LinkMessage.observed`), with this member's own end of that link.
public struct ReachReport: Sendable, Equatable {
    /// The source `host:port` of this member's link connection as the peer sees it (nil: not said).
    public var link: String?
    /// This member's own end (`host:port`) of that link, as its socket says.
    public var linkLocal: String?
    /// The source `host:port` of this member's datagrams as the peer sees them (nil: none yet).
    public var datagram: String?
    /// When the report arrived (the core's time).
    public var at: Double

    public init(link: String?, linkLocal: String?, datagram: String?, at: Double) {
        self.link = link; self.linkLocal = linkLocal; self.datagram = datagram; self.at = at
    }
}

/// The reflexive addresses of this member and its NAT kind, from what its linked peers report;
/// and what this member sees of each peer, to report back. Pure: time comes in as `now`.
///
/// Guarantees:
/// - memory is bounded: at most `reporterLimit` reports about this member (one per reporter, its
///   latest; the oldest is dropped for a new reporter) and one seen address pair per linked peer;
///   an address longer than `MemberInfo.maximumAddress` or not numeric is never kept;
/// - no single peer decides when there are others: every reporter's report gives one verdict
///   (`verdict`), and `nat` is the verdict of a strict majority of the reporters that gave one
///   (`unknown` without one). A lone reporter decides only while it is the only one (as a lone
///   STUN server would): with three or more reporters, one hostile member cannot change `nat`;
/// - no single peer ever picks the address this member signs: `agreedDatagramSource` needs two
///   reporters that agree; a lone reporter's address (`loneDatagramSource`) is only a punch
///   candidate, offered to a relayed peer during an attempt (`HolePunch`);
/// - a peer is sent what this member sees of it when that changes, and again every `refresh`
///   seconds (a report sent before the peer knew this member is not lost for good).
public struct ReachObservations: Sendable {
    /// Most reporters whose reports are kept.
    public static let reporterLimit = 16
    /// Seconds after which a peer is sent what this member sees of it again, unchanged.
    public static let refresh = 5.0

    /// What peers report about this member, by reporter.
    public private(set) var reports: [MemberID: ReachReport] = [:]
    /// What this member sees of each linked peer: its link's remote end, its datagrams' source.
    public private(set) var seen: [MemberID: (link: String?, datagram: String?)] = [:]
    /// This member's own end of each link (what a peer's report of the link is compared with).
    private var linkLocal: [MemberID: String] = [:]
    /// What was last reported to each peer, and when.
    private var reported: [MemberID: (link: String?, datagram: String?, at: Double)] = [:]
    /// When this member's record last took new reach addresses (`SessionCore.publishReach`).
    public internal(set) var publishedAt = -Double.infinity
    /// When `SessionCore.publishReach` last looked.
    var publishCheckedAt = -Double.infinity
    /// `due` has nothing to do before this (a change sets it back, so it runs at the next call).
    private var checkAt = -Double.infinity

    public init() {}

    /// An address fit to keep: numeric `host:port` within the record's length limit.
    static func usable(_ addr: String?) -> String? {
        guard let addr, HostPort.isNumeric(addr) else { return nil }
        return addr
    }

    // MARK: what this member sees

    /// A link to `peer` came up: `remote` is the peer's end as this member's socket sees it,
    /// `local` this member's own end.
    public mutating func linkUp(_ peer: MemberID, remote: String, local: String) {
        seen[peer] = (Self.usable(remote), seen[peer]?.datagram)
        linkLocal[peer] = Self.usable(local)
        reported[peer] = nil
        checkAt = -.infinity
    }

    /// The link to `peer` closed: nothing more is reported to it, and its report no longer counts.
    public mutating func linkDown(_ peer: MemberID) {
        seen[peer] = nil
        linkLocal[peer] = nil
        reported[peer] = nil
        reports[peer] = nil
    }

    /// An authenticated datagram from linked `peer` came from `source`.
    public mutating func sawDatagram(from peer: MemberID, source: String) {
        guard let known = seen[peer], known.datagram != source, let source = Self.usable(source) else { return }
        seen[peer] = (known.link, source)
        checkAt = -.infinity
    }

    /// The reports due at `now`: `(peer, link, datagram)` for every linked peer whose seen
    /// addresses changed since they were last reported, or were reported `refresh` ago.
    public mutating func due(now: Double) -> [(peer: MemberID, link: String?, datagram: String?)] {
        guard now >= checkAt else { return [] }
        checkAt = now + Self.refresh / 10
        var out: [(peer: MemberID, link: String?, datagram: String?)] = []
        for peer in seen.keys.sorted() {
            guard let s = seen[peer], s.link != nil || s.datagram != nil else { continue }
            if let last = reported[peer], last.link == s.link, last.datagram == s.datagram, now < last.at + Self.refresh { continue }
            reported[peer] = (s.link, s.datagram, now)
            out.append((peer, s.link, s.datagram))
        }
        return out
    }

    // MARK: what peers report

    /// `peer` (linked) reports where it sees this member's traffic come from. Addresses that are
    /// not numeric `host:port`s are dropped; false when nothing usable was said.
    @discardableResult
    public mutating func receive(from peer: MemberID, link: String?, datagram: String?, now: Double) -> Bool {
        let link = Self.usable(link), datagram = Self.usable(datagram)
        guard link != nil || datagram != nil else { return false }
        if reports[peer] == nil, reports.count >= Self.reporterLimit,
           let oldest = reports.min(by: { ($0.value.at, $0.key) < ($1.value.at, $1.key) })?.key {
            reports[oldest] = nil
        }
        reports[peer] = ReachReport(link: link, linkLocal: linkLocal[peer], datagram: datagram, at: now)
        return true
    }

    // MARK: conclusions

    /// One reporter's verdict: its report of this member's datagrams first (the mapping of the
    /// listening socket, the one others would reach), else of its link. The source equal to this
    /// member's own address (`advertised`, or the link's own end) → `none`; its port kept → `easy`
    /// (port-preserving mapping); the same mapping reported by another member → `easy`
    /// (endpoint-independent); another port, seen by nobody else → `hard`.
    public func verdict(of reporter: MemberID, advertised: String, counting: Set<MemberID>? = nil) -> NATKind {
        guard let report = reports[reporter] else { return .unknown }
        if let datagram = report.datagram {
            if datagram == advertised { return .none }
            if Self.port(datagram) != nil && Self.port(datagram) == Self.port(advertised) { return .easy }
            let others = reports.filter { $0.key != reporter && (counting?.contains($0.key) ?? true) }
            return others.contains { $0.value.datagram == datagram } ? .easy : .hard
        }
        if let link = report.link, let mine = report.linkLocal {
            if link == mine { return .none }
            return Self.port(link) == Self.port(mine) ? .easy : .hard
        }
        return .unknown
    }

    /// The NAT kind: the verdict of a strict majority of the reporters in `counting` (all when
    /// nil) that gave one; `unknown` when none did or no verdict has a majority.
    public func nat(advertised: String, counting: Set<MemberID>? = nil) -> NATKind {
        var votes: [NATKind: Int] = [:]
        for reporter in reports.keys where counting?.contains(reporter) ?? true {
            let v = verdict(of: reporter, advertised: advertised, counting: counting)
            if v != .unknown { votes[v, default: 0] += 1 }
        }
        let total = votes.values.reduce(0, +)
        guard let (kind, n) = votes.max(by: { $0.value < $1.value }), n * 2 > total else { return .unknown }
        return kind
    }

    /// The addresses peers see this member's traffic come from: its datagrams' sources (most
    /// reported first), then the link sources of reporters that saw no datagram. Distinct; at
    /// most `reporterLimit` (one per reporter).
    public func reflexive(counting: Set<MemberID>? = nil) -> [String] {
        var count: [String: Int] = [:]
        for (reporter, report) in reports where counting?.contains(reporter) ?? true {
            if let a = report.datagram ?? report.link { count[a, default: 0] += 1 }
        }
        let datagramSources = Set(reports.compactMap { counting?.contains($0.key) ?? true ? $0.value.datagram : nil })
        return count.sorted { a, b in
            let (ad, bd) = (datagramSources.contains(a.key), datagramSources.contains(b.key))
            if ad != bd { return ad }
            return a.value != b.value ? a.value > b.value : a.key < b.key
        }.map(\.key)
    }

    /// The datagram source that reporters in `counting` (all when nil) agree on, fit to be signed
    /// as this member's reach address: reported by at least two of them and by more than any other
    /// address (a tie names none). One reporter's word is never signed, even while it is the only
    /// reporter (`loneDatagramSource`): a hostile member alone cannot pick the address this member
    /// advertises to everyone, by a tie, by speaking alone or by outvoting nobody.
    public func agreedDatagramSource(counting: Set<MemberID>? = nil) -> String? {
        var count: [String: Int] = [:]
        for (reporter, report) in reports where counting?.contains(reporter) ?? true {
            if let a = report.datagram { count[a, default: 0] += 1 }
        }
        let ranked = count.sorted { $0.value > $1.value }
        guard let top = ranked.first, top.value >= 2 else { return nil }
        if ranked.count > 1, ranked[1].value == top.value { return nil }
        return top.key
    }

    /// The datagram source of the only reporter in `counting` (all when nil) that reported one;
    /// nil with none or several. Not confirmed by anyone else, so it is never signed: it is only
    /// offered to a relayed peer as a punch candidate (`SessionCore.tentativeReach`), until a
    /// second reporter — such as the peer of a punched link — sees the same source.
    public func loneDatagramSource(counting: Set<MemberID>? = nil) -> String? {
        let sources = reports.filter { counting?.contains($0.key) ?? true }.compactMap(\.value.datagram)
        return sources.count == 1 ? sources[0] : nil
    }

    static func port(_ addr: String) -> Int? { (try? HostPort.split(addr))?.port }
}
