#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One member's suspicion timer with Lifeguard's dynamic timeout (Lifeguard §IV.B, memberlist
/// `suspicion.go`).
///
/// Guarantees: the timeout starts at `max` and never goes below `min`; after `n` distinct
/// confirmations (suspecters other than the first, each counted once) it is
/// `max − (max − min) × log(n + 1) / log(k + 1)`, so it reaches `min` at `k` confirmations;
/// with `k < 1` it is `min` from the start.
public struct SWIMSuspicion: Sendable, Equatable {
    public private(set) var start: Double
    public let min: Double
    public let max: Double
    public let k: Int
    /// Everyone who suspected the member, the first suspecter included.
    public private(set) var suspecters: Set<MemberID>

    public init(from: MemberID, k: Int, min: Double, max: Double, now: Double) {
        self.start = now; self.min = min; self.max = Swift.max(min, max); self.k = k
        suspecters = [from]
    }

    /// Independent confirmations so far (the first suspecter is not one).
    public var confirmations: Int { suspecters.count - 1 }

    /// The whole timeout after `n` confirmations.
    public static func timeout(confirmations n: Int, k: Int, min: Double, max: Double) -> Double {
        guard k >= 1 else { return min }
        let fraction = log(Double(n) + 1) / log(Double(k) + 1)
        return Swift.max(min, max - fraction * (max - min))
    }

    /// When the member is declared failed unless it refutes first.
    public var deadline: Double {
        start + Self.timeout(confirmations: confirmations, k: k, min: min, max: max)
    }

    /// Starts the timeout again from `now` (this member heard from the suspect itself meanwhile).
    public mutating func rearm(now: Double) { start = now }

    /// Counts `from` as a confirmation; true when it was new (then the suspicion is re-gossiped).
    public mutating func confirm(_ from: MemberID) -> Bool {
        guard confirmations < k, !suspecters.contains(from) else { return false }
        suspecters.insert(from)
        return true
    }

    /// The (min, max) timeouts for a cluster of `members` live members (memberlist
    /// `suspicionTimeout`: α × max(1, log10(N)) × probe interval, at least `minSuspicionTimeout`,
    /// and β times that).
    public static func bounds(members: Int, settings: SWIMSettings) -> (min: Double, max: Double) {
        let scale = Swift.max(1, log10(Double(Swift.max(1, members))))
        let min = Swift.max(settings.minSuspicionTimeout, settings.suspicionAlpha * scale * settings.probeInterval)
        return (min, settings.suspicionBeta * min)
    }
}
