import HuddleCore

/// Everything that defines one simulated run; the same scenario always gives the same report.
///
/// Nodes are numbered `0..<nodes`; node 0 starts first and every later node joins through a random
/// node already running. Times are virtual seconds.
public struct SimScenario: Sendable {
    /// A node stops forever at `at`.
    public struct Crash: Sendable, Equatable { public var node: Int; public var at: Double
        public init(node: Int, at: Double) { self.node = node; self.at = at } }
    /// A node processes nothing from `at` for `duration` seconds, then handles what queued up.
    public struct Pause: Sendable, Equatable { public var node: Int; public var at: Double; public var duration: Double
        public init(node: Int, at: Double, duration: Double) { self.node = node; self.at = at; self.duration = duration } }
    /// Nodes in `side` cannot reach the others (nor they them) from `start` to `end`.
    public struct Partition: Sendable, Equatable { public var side: Set<Int>; public var start: Double; public var end: Double
        public init(side: Set<Int>, start: Double, end: Double) { self.side = side; self.start = start; self.end = end } }
    /// A node leaves gracefully at `at`.
    public struct Leave: Sendable, Equatable { public var node: Int; public var at: Double
        public init(node: Int, at: Double) { self.node = node; self.at = at } }

    public var nodes: Int
    public var seed: UInt64
    public var duration: Double
    /// Probability that one datagram is lost (push-pull over links is reliable).
    public var loss: Double = 0
    /// One-way delay of every datagram and push-pull leg, plus a uniform jitter (reorders messages).
    public var delay: Double = 0.001
    public var jitter: Double = 0.002
    /// Nodes 1..<nodes join at uniform random times in `0...joinWindow` (unless `joinTimes` is set).
    public var joinWindow: Double = 5
    /// When true, every node but the late joiners starts at time 0 already knowing all the others
    /// (as long after a bootstrap), so large runs measure steady state, not an N² join flood.
    public var prejoined = false
    /// Times at which the last `lateJoins.count` nodes join (used with `prejoined`).
    public var lateJoins: [Double] = []
    /// Explicit join time per node (overrides `joinWindow`); node 0 should be the earliest.
    public var joinTimes: [Double]? = nil
    /// Traffic is measured from this time on (steady state, after joins settled).
    public var measureFrom: Double = 10
    public var settings: SWIMSettings = .lan
    public var crashes: [Crash] = []
    public var pauses: [Pause] = []
    public var partitions: [Partition] = []
    public var leaves: [Leave] = []
    /// Keep a `SimTrace` of every delivery, membership change and fault (costs a hash per byte).
    public var trace = false

    public init(nodes: Int, seed: UInt64, duration: Double) {
        self.nodes = nodes; self.seed = seed; self.duration = duration
    }

    /// `count` crashes of distinct random nodes (never node 0), evenly spaced over `from...to`.
    public static func spreadCrashes(count: Int, nodes: Int, from: Double, to: Double, seed: UInt64) -> [Crash] {
        var rng = SWIMRandom(seed: seed ^ 0xC4A5_11ED)
        var pool = Array(1..<max(1, nodes))
        pool.shuffle(using: &rng)
        let n = min(count, pool.count)
        return (0..<n).map { i in
            Crash(node: pool[i], at: n == 1 ? from : from + (to - from) * Double(i) / Double(n - 1))
        }
    }

    /// Half of the nodes (a random half) split from the others during `start..<end`.
    public static func halves(nodes: Int, start: Double, end: Double, seed: UInt64) -> Partition {
        var rng = SWIMRandom(seed: seed ^ 0x5A17_7ED)
        var all = Array(0..<nodes)
        all.shuffle(using: &rng)
        return Partition(side: Set(all.prefix(nodes / 2)), start: start, end: end)
    }
}
