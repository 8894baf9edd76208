/// Accepts each counter from one sender at most once, tolerating reordering within `size` counters
/// (a sliding bitmap, as in IPsec and WireGuard). Counters older than the window are refused.
public struct ReplayWindow: Sendable {
    public static let size: UInt64 = 1024
    private var highest: UInt64 = 0
    private var seenAny = false
    private var bits = [UInt64](repeating: 0, count: Int(size / 64))

    public init() {}

    /// Records `counter` and returns true the first time it is seen inside the window.
    public mutating func accept(_ counter: UInt64) -> Bool {
        if !seenAny || counter > highest {
            let shift = seenAny ? counter - highest : Self.size
            if shift >= Self.size {
                for i in bits.indices { bits[i] = 0 }
            } else {
                for c in (highest + 1)...counter { clear(c) }
            }
            highest = counter
            seenAny = true
            set(counter)
            return true
        }
        guard highest - counter < Self.size else { return false }
        if isSet(counter) { return false }
        set(counter)
        return true
    }

    private func index(_ c: UInt64) -> (Int, UInt64) { (Int((c % Self.size) / 64), 1 << (c % 64)) }
    private mutating func set(_ c: UInt64) { let (i, m) = index(c); bits[i] |= m }
    private mutating func clear(_ c: UInt64) { let (i, m) = index(c); bits[i] &= ~m }
    private func isSet(_ c: UInt64) -> Bool { let (i, m) = index(c); return bits[i] & m != 0 }
}
