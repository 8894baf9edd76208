/// What stands between a simulated member and the others (issue 36): the world decides who can
/// reach whom; no member's core is told its kind, it learns it from what its peers observe.
///
/// - `public`: nothing translates or filters: any member can dial it and send it datagrams.
/// - `easy`: an endpoint-independent mapping (port-preserving masquerade): the member's traffic
///   leaves from its router's address with its own port, the same towards every member.
/// - `hard`: an endpoint-dependent mapping (`masquerade random`): another port towards each member.
///
/// Both NATs filter as a home router does: a datagram or connection reaches the member only from
/// a member it has sent to (datagrams) or is dialing at that moment (a hole punch), and only at the
/// mapping it made towards that member. So a direct link forms with a NATted member when it dials
/// out (to a public member), or when both ends of a pair dial each other at once at the addresses
/// the other's NAT maps them to: easy ↔ easy and public ↔ anything; never hard ↔ hard, and never
/// easy ↔ hard (a hard NAT's mapping towards the easy member is a port no one can learn, and the
/// easy router drops what it did not ask for — as the NAT lab's matrix asserts, `Tests/hosts/NATMatrix.swift`).
public enum SimNAT: String, Sendable, CaseIterable, Comparable {
    case `public`, easy, hard

    public static func < (a: SimNAT, b: SimNAT) -> Bool { a.order < b.order }
    private var order: Int { SimNAT.allCases.firstIndex(of: self) ?? 0 }

    /// "easy-hard": a pair's kinds, the lower first.
    static func pairName(_ a: SimNAT, _ b: SimNAT) -> String { "\(min(a, b).rawValue)-\(max(a, b).rawValue)" }
}

/// The simulated world's addresses: each member's own (`SimAddress`, `10.x.y.z`), its router's
/// (`172.16.x.y`) when NATted, and the mapping its NAT makes towards each member.
struct SimNATMap {
    let kinds: [SimNAT]

    /// The port members listen on (and send datagrams and punch dials from).
    static let listenPort = 7400

    func kind(_ i: Int) -> SimNAT { kinds[i] }

    static func host(_ i: Int) -> String { "10.\((i >> 16) & 255).\((i >> 8) & 255).\(i & 255)" }
    static func routerHost(_ i: Int) -> String { "172.\(16 + ((i >> 16) & 15)).\((i >> 8) & 255).\(i & 255)" }

    /// The local port of member `i`'s outgoing (non-punch) connection to member `j`.
    static func ephemeralPort(toward j: Int) -> Int { 30000 + j % 30000 }

    /// Where traffic member `i` sends from its `port` towards member `j` appears to come from.
    func mapped(_ i: Int, toward j: Int, port: Int = listenPort) -> String {
        switch kinds[i] {
        case .public: "\(Self.host(i)):\(port)"
        case .easy: "\(Self.routerHost(i)):\(port)"
        case .hard: "\(Self.routerHost(i)):\(20000 + j % 10000)"
        }
    }

    /// The host part of `addr` (`host:port`).
    static func hostPart(_ addr: String) -> Substring {
        addr.lastIndex(of: ":").map { addr[..<$0] } ?? Substring(addr)
    }
}
