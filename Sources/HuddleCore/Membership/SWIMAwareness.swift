/// Lifeguard's local health multiplier (LHM, Lifeguard §IV.A, memberlist `awareness.go`).
///
/// Guarantees: the score stays in `0...max-1`; probe intervals and timeouts are multiplied by
/// `score + 1`, so a member that notices it is slow (missed nacks, failed probes, being suspected)
/// probes less often and waits longer before suspecting others, and speeds back up after
/// successful probes.
public struct SWIMAwareness: Sendable, Equatable {
    public let max: Int
    public private(set) var score: Int = 0

    public init(max: Int) { self.max = Swift.max(1, max) }

    /// Adds `delta`, clamped to the range.
    public mutating func apply(_ delta: Int) {
        score = Swift.min(Swift.max(score + delta, 0), max - 1)
    }

    /// `value` scaled by the current health: value × (score + 1).
    public func scale(_ value: Double) -> Double { value * Double(score + 1) }
}
