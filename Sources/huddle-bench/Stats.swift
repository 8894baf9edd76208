/// One line of a result table: what was measured for Huddle, what it is compared with in the same
/// run, and how far it is from the target.
struct BenchRow {
    var scenario: String
    var measure: String
    var huddle: String
    var comparison: String
    var ratio: String
    var target: String
    /// Peak RSS of every huddle process of the scenario (`ClusterMemory`), filled in by `record`.
    var memory = ""
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}

func fmt(_ v: Double, _ digits: Int = 2) -> String { v.isNaN ? "n/a" : String(format: "%.\(digits)f", v) }
