/// The figures of one simulated run (what `huddle-sim` prints and the tests check).
///
/// Guarantees: every count is exact for the run; times are virtual seconds; a crash counts as
/// detected only when every member still running at the end, that knew the crashed member, holds
/// it as failed.
public struct SimReport: Sendable, Codable, Equatable {
    /// Median and maximum of a set of durations (nil when the set is empty).
    public struct Spread: Sendable, Codable, Equatable {
        public var count: Int
        public var median: Double?
        public var p90: Double?
        public var max: Double?

        public init(_ values: [Double]) {
            let v = values.sorted()
            count = v.count
            median = v.isEmpty ? nil : (v.count % 2 == 1 ? v[v.count / 2] : (v[v.count / 2 - 1] + v[v.count / 2]) / 2)
            p90 = v.isEmpty ? nil : v[min(v.count - 1, Int((Double(v.count) * 0.9).rounded(.up)) - 1)]
            max = v.last
        }
    }

    public var nodes: Int
    public var seed: UInt64
    public var duration: Double
    public var loss: Double
    /// Per joining member: time from its join until every member that was already there saw it.
    public var joinConvergence: Spread
    public var crashes: Int
    public var crashesDetected: Int
    /// Per detected crash: time from the crash until the last running member marked it failed.
    public var detection: Spread
    /// Per crash: time until the first member marked it failed.
    public var firstDetection: Spread
    /// Times a member that was running (not crashed) was marked failed by someone, outside partitions.
    public var falsePositives: Int
    /// Times a running member was marked failed across an active partition (expected).
    public var partitionFailures: Int
    /// From the start of the first partition until its last failure across it (each side has
    /// declared the other failed).
    public var partitionSplit: Double?
    /// Times a running member was marked suspect (each one refuted or led to a false positive).
    public var falseSuspicions: Int
    /// Times a member that left was reported `left` / wrongly `failed`.
    public var leftReports: Int
    public var leftReportedFailed: Int
    /// At the end: every running member sees every other running member alive (and the count of
    /// (observer, member) pairs where it does not).
    public var viewsConverged: Bool
    public var viewMismatches: Int
    /// Datagram traffic per member per second from `measureFrom` on (sent), and push-pull bytes.
    public var messagesPerMemberSecond: Double
    public var bytesPerMemberSecond: Double
    public var pushPullBytesPerMemberSecond: Double
    /// The largest datagram sent.
    public var largestDatagram: Int
    public var events: Int
    public var wallSeconds: Double
    /// With `SimScenario.trace`: the `SimTrace` digest of the run and its number of records.
    public var traceDigest: String?
    public var traceRecords: Int?
}
