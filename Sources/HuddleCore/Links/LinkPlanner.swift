/// Decides which links to open so that every live member holds one link to every other (a full
/// mesh), given the members membership reports alive and the links that exist.
///
/// Guarantees: a wanted member without a link is dialed by the lower member id at once and, if no
/// link appears within `dialGrace`, by the higher one too; dials repeat every `redialInterval`
/// while the member stays wanted and unlinked; of two links to one member, the one dialed by the
/// lower id stays (a direct link over a relayed one first). A member whose link runs over a relay
/// is still dialed at its address (both ends: the one behind a NAT reaches a public one), at once
/// and then at intervals that double from `redialInterval` up to `relayedRedialMaximum`: a relayed
/// link is a fallback, never a reason to stop trying the direct path (issue 36: public ↔ any ends
/// direct). Pure: time comes in as `now`, dials go out as effects.
public struct LinkPlanner: Sendable {
    public struct Dial: Sendable, Equatable {
        public let member: MemberID
        public let addr: String
    }

    public let local: MemberID
    public var dialGrace: Double = 1.0
    public var redialInterval: Double = 2.0
    /// The longest wait between direct dials to a member linked through a relay.
    public var relayedRedialMaximum: Double = 60.0

    private var wanted: [MemberID: (addr: String, since: Double, lastDial: Double)] = [:]
    /// Members with a link up.
    public private(set) var linked: Set<MemberID> = [] { didSet { linkedVersion &+= 1 } }
    /// Changes with every change to `linked`.
    public private(set) var linkedVersion: UInt64 = 0
    /// Members whose link runs over a relay: when each is next dialed directly, and the wait after that.
    private var relayedDials: [MemberID: (next: Double, wait: Double)] = [:]

    public init(local: MemberID) { self.local = local }

    /// Membership says `member` is alive at `addr`: keep a link to it. Returns a dial when it is ours to make now.
    public mutating func want(_ member: MemberID, addr: String, now: Double) -> Dial? {
        guard member != local else { return nil }
        if var known = wanted[member] {
            known.addr = addr
            wanted[member] = known
            return nil
        }
        let dialsNow = local < member && !linked.contains(member)
        wanted[member] = (addr, now, dialsNow ? now : -.infinity)
        return dialsNow ? Dial(member: member, addr: addr) : nil
    }

    /// Membership says `member` failed or left: stop dialing it.
    public mutating func forget(_ member: MemberID) { wanted[member] = nil }

    /// A link to `member` is up; `relayed`: it runs over a relay (dialed directly still, see above).
    public mutating func linkUp(_ member: MemberID, relayed: Bool = false, now: Double = 0) {
        linked.insert(member)
        relayedDials[member] = relayed ? (now, redialInterval) : nil
    }
    public mutating func linkDown(_ member: MemberID) {
        linked.remove(member)
        relayedDials[member] = nil
    }

    /// Dials that are due: wanted members without a link.
    public mutating func tick(now: Double) -> [Dial] {
        var dials: [Dial] = []
        // Only the unlinked are sorted (with a full mesh, none): sorting every wanted member at
        // every tick cost more than the rest of the planner.
        var unlinked: [MemberID] = []
        for member in wanted.keys where !linked.contains(member) { unlinked.append(member) }
        for member in unlinked.sorted() {
            guard let w = wanted[member] else { continue }
            let waited = now - w.since >= (local < member ? 0 : dialGrace)
            if waited && now - w.lastDial >= redialInterval {
                wanted[member]?.lastDial = now
                dials.append(Dial(member: member, addr: w.addr))
            }
        }
        for member in relayedDials.keys.sorted() {
            guard let r = relayedDials[member], now >= r.next, let w = wanted[member] else { continue }
            relayedDials[member] = (now + r.wait, min(relayedRedialMaximum, r.wait * 2))
            dials.append(Dial(member: member, addr: w.addr))
        }
        return dials
    }

    /// Of two links to the same member, a direct one stays over one through a relay (a punched
    /// link replaces the relayed one, issue 36); of two alike, the one dialed by the lower member
    /// id. Both ends hold both links and decide alike.
    public static func keepsNewLink(newDialedBy: MemberID, existingDialedBy: MemberID, newRelayed: Bool = false, existingRelayed: Bool = false) -> Bool {
        if newRelayed != existingRelayed { return !newRelayed }
        return newDialedBy < existingDialedBy
    }
}
