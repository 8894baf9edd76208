import HuddleCrypto

/// The datagram keys of this member's links (`PairDatagramKeys`), per member, with each key's send
/// counter and replay window: what proves, datagram by datagram, who sent it and for whom.
///
/// Guarantees: a member's keys are installed only when a link to it is admitted (the handshake
/// proved its pinned node key). The keys of the link in use are *current*; the keys of a link that
/// closed or was replaced are *retired* and still open (and, while nothing newer exists, seal)
/// datagrams for `grace` seconds — what was in flight, and a duplicate link the other end kept a
/// moment longer — then are dropped for good (forward secrecy); `forget` drops them at once (the
/// member failed or left). At most `entriesPerMember` keys per member (the oldest retired go
/// first). Counters are per key, so each key's replay window is per authenticated sender and
/// starts at 0 (`ReplayWindow(startsAtZero:)`). Pure: time comes in as `now`.
public struct DatagramKeyring: Sendable {
    public static let grace = 5.0
    public static let entriesPerMember = 4

    /// One link's keys as a receiver looks them up (`DatagramOpener` holds a copy of these alone).
    struct Entry: Sendable {
        let serial: UInt64
        let keys: PairDatagramKeys
        var retiredAt: Double?
    }

    /// Per key: datagrams sealed with it so far, and the counters seen under it.
    private struct Use: Sendable {
        var sent: UInt64 = 0
        var window = ReplayWindow(startsAtZero: true)
    }

    /// What `nextSend` picked: the key (by serial) and the counter to put in the payload.
    public struct Sending: Sendable, Equatable {
        public let serial: UInt64
        public let counter: UInt64
    }

    private(set) var entries: [MemberID: [Entry]] = [:] {
        didSet { nextExpiry = Self.earliestExpiry(entries) }
    }
    private var uses: [UInt64: Use] = [:]
    private var nextSerial: UInt64 = 1
    /// Grows whenever a key is installed or dropped (the node republishes its `DatagramOpener`).
    public private(set) var generation: UInt64 = 0

    public init() {}

    /// Whether any key (current or retired) is held for `member`.
    public func has(_ member: MemberID) -> Bool { entries[member] != nil }

    /// Members with keys, in member order.
    public var members: [MemberID] { entries.keys.sorted() }

    /// Installs a link's keys for `member`. `current`: the link now in use (earlier keys of the
    /// member retire now); otherwise a duplicate link that lost (its keys are retired at once, so
    /// datagrams the other end sealed with them before it switched still open). Returns the serial.
    @discardableResult
    public mutating func install(_ keys: PairDatagramKeys, for member: MemberID, current: Bool, now: Double) -> UInt64 {
        let serial = nextSerial
        nextSerial += 1
        var list = entries[member] ?? []
        if current {
            for i in list.indices where list[i].retiredAt == nil { list[i].retiredAt = now }
        }
        list.append(Entry(serial: serial, keys: keys, retiredAt: current ? nil : now))
        while list.count > Self.entriesPerMember {
            let oldest = list.firstIndex { $0.retiredAt != nil } ?? 0
            uses[list[oldest].serial] = nil
            list.remove(at: oldest)
        }
        entries[member] = list
        uses[serial] = Use()
        generation += 1
        return serial
    }

    /// The link to `member` closed: its keys retire (they still open datagrams for `grace`).
    public mutating func retire(_ member: MemberID, now: Double) {
        guard var list = entries[member] else { return }
        for i in list.indices where list[i].retiredAt == nil { list[i].retiredAt = now }
        entries[member] = list
    }

    /// `member` failed or left: its keys are dropped at once.
    public mutating func forget(_ member: MemberID) {
        guard let list = entries.removeValue(forKey: member) else { return }
        for entry in list { uses[entry.serial] = nil }
        generation += 1
    }

    /// Drops the keys retired `grace` seconds ago or more.
    public mutating func expire(now: Double) {
        guard nextExpiry <= now else { return }
        for member in entries.keys.sorted() {
            guard let list = entries[member] else { continue }
            let kept = list.filter { entry in entry.retiredAt.map { now < $0 + Self.grace } ?? true }
            guard kept.count != list.count else { continue }
            for entry in list where !kept.contains(where: { $0.serial == entry.serial }) { uses[entry.serial] = nil }
            entries[member] = kept.isEmpty ? nil : kept
        }
        generation += 1
    }

    /// When `expire` next has work (infinity when nothing is retired). Kept as keys change, not
    /// found at each read: the core's `nextDeadline` reads it after every input.
    public private(set) var nextExpiry = Double.infinity

    private static func earliestExpiry(_ entries: [MemberID: [Entry]]) -> Double {
        var earliest = Double.infinity
        for list in entries.values {
            for entry in list { if let at = entry.retiredAt { earliest = min(earliest, at + Self.grace) } }
        }
        return earliest
    }

    /// The key to seal the next datagram to `member` with — the current one, else the newest
    /// retired one — and its next counter; nil when no key is held.
    public mutating func nextSend(to member: MemberID) -> Sending? {
        guard let list = entries[member] else { return nil }
        guard let entry = list.last(where: { $0.retiredAt == nil }) ?? list.max(by: { $0.serial < $1.serial }),
              var use = uses[entry.serial], use.sent < UInt64.max else { return nil }
        use.sent += 1
        uses[entry.serial] = use
        return Sending(serial: entry.serial, counter: use.sent)
    }

    /// The send key and its id for `member`'s key `serial` (nil once it was dropped).
    public func sendKey(to member: MemberID, serial: UInt64) -> (key: [UInt8], id: UInt32)? {
        guard let entry = entries[member]?.first(where: { $0.serial == serial }) else { return nil }
        return (entry.keys.send, entry.keys.sendID)
    }

    /// Records `counter` of a datagram that opened under `member`'s key `serial` (nil once that
    /// key was dropped).
    public mutating func check(_ member: MemberID, serial: UInt64, counter: UInt64) -> ReplayWindow.Verdict? {
        guard entries[member]?.contains(where: { $0.serial == serial }) == true, var use = uses[serial] else { return nil }
        let verdict = use.window.check(counter)
        uses[serial] = use
        return verdict
    }

    /// Seals `payload` (from this member) as `sealing` says: under the session key, or under the
    /// send key it names (nil when that key was dropped meanwhile).
    public func seal(_ payload: DatagramPayload, _ sealing: DatagramSealing, session: DatagramSeal) -> [UInt8]? {
        switch sealing {
        case .session:
            return session.seal(payload.encoded())
        case let .link(recipient, serial):
            guard let (key, id) = sendKey(to: recipient, serial: serial) else { return nil }
            return PairDatagramSeal.seal(payload.encoded(), from: payload.sender, to: recipient, keyID: id, key: key)
        }
    }
}
