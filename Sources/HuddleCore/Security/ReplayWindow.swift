/// Accepts each counter from one sender at most once, tolerating reordering within `size` counters
/// (a sliding bitmap, as in IPsec and WireGuard). Counters older than the window are refused, and
/// so is a counter more than `maximumJump` ahead of the highest seen: one datagram can then never
/// push the window out of reach of the sender's real counters (a sender's counter grows by one per
/// datagram to this receiver, so an honest jump that large means a million datagrams in a row lost).
public struct ReplayWindow: Sendable {
    public static let size: UInt64 = 1024
    public static let maximumJump: UInt64 = 1 << 20

    /// What `check` decided about one counter.
    public enum Verdict: Sendable, Equatable {
        /// Not seen before and inside the window: recorded.
        case fresh
        /// Seen already, or older than the window.
        case replayed
        /// Further ahead of the highest counter seen than `maximumJump`: not recorded.
        case jump
    }

    private var highest: UInt64 = 0
    private var seenAny: Bool
    private var bits = [UInt64](repeating: 0, count: Int(size / 64))

    /// `startsAtZero`: the sender's counters start at 1 on a key used with this receiver alone (a
    /// link's datagram keys), so the first counter too must be within `maximumJump` of 0.
    /// Otherwise (a sender's counter shared with other receivers) the first counter seen is taken
    /// as it is.
    public init(startsAtZero: Bool = false) {
        seenAny = startsAtZero
        if startsAtZero { set(0) }
    }

    /// Records `counter` and returns true the first time it is seen inside the window.
    public mutating func accept(_ counter: UInt64) -> Bool { check(counter) == .fresh }

    /// Records `counter` when it is fresh; says why not otherwise.
    public mutating func check(_ counter: UInt64) -> Verdict {
        if !seenAny || counter > highest {
            let shift = seenAny ? counter - highest : Self.size
            guard shift <= Self.maximumJump || !seenAny else { return .jump }
            if shift >= Self.size {
                for i in bits.indices { bits[i] = 0 }
            } else {
                for c in (highest + 1)...counter { clear(c) }
            }
            highest = counter
            seenAny = true
            set(counter)
            return .fresh
        }
        guard highest - counter < Self.size else { return .replayed }
        if isSet(counter) { return .replayed }
        set(counter)
        return .fresh
    }

    private func index(_ c: UInt64) -> (Int, UInt64) { (Int((c % Self.size) / 64), 1 << (c % 64)) }
    private mutating func set(_ c: UInt64) { let (i, m) = index(c); bits[i] |= m }
    private mutating func clear(_ c: UInt64) { let (i, m) = index(c); bits[i] &= ~m }
    private func isSet(_ c: UInt64) -> Bool { let (i, m) = index(c); return bits[i] & m != 0 }
}
