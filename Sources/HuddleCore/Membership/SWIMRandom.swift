/// A small seeded pseudo-random generator (SplitMix64, Steele/Lea/Flood 2014).
///
/// Guarantees: the same seed gives the same sequence on every platform and run, so a membership
/// instance and the simulator are reproducible. It is not cryptographic: the node seeds it from
/// the system's secure generator, and it only decides probe order, helpers and jitter.
public struct SWIMRandom: RandomNumberGenerator, Hashable, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// The state: a generator made with it as its seed goes on from here.
    public var currentSeed: UInt64 { state }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in `0..<1`.
    public mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// A uniform value in `lower...upper` (returns `lower` when the range is empty).
    public mutating func uniform(_ lower: Double, _ upper: Double) -> Double {
        upper > lower ? lower + (upper - lower) * unit() : lower
    }

    /// A uniform index in `0..<count` (0 when `count` is not positive).
    public mutating func index(_ count: Int) -> Int {
        count > 0 ? Int(next() % UInt64(count)) : 0
    }
}
