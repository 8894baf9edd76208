/// One Prometheus histogram series as its cumulative bucket counts, read from the text format a
/// node serves (`huddle run --metrics`): enough to take the difference of two scrapes, add up
/// nodes, and estimate a quantile as Prometheus' `histogram_quantile` does.
public struct HistogramBuckets: Sendable, Equatable {
    /// Each bucket's upper bound (`le`; `.infinity` for `+Inf`) and the count at or below it,
    /// ascending by bound.
    public private(set) var buckets: [Bucket]

    public struct Bucket: Sendable, Equatable {
        public var bound: Double
        public var count: Double
    }

    public init(_ buckets: [Bucket] = []) { self.buckets = buckets.sorted { $0.bound < $1.bound } }

    /// Observations counted.
    public var total: Double { buckets.last?.count ?? 0 }

    /// The series of histogram `metric` in `text`, by the value of `label` (`metric_bucket{label="…",le="…"} N`);
    /// with no label, the one series under "".
    public static func parse(_ text: String, metric: String, label: String? = nil) -> [String: HistogramBuckets] {
        var found: [String: [Bucket]] = [:]
        let prefix = metric + "_bucket{"
        for line in text.split(separator: "\n") where line.hasPrefix(prefix) {
            guard let close = line.lastIndex(of: "}") else { continue }
            let labels = line[line.index(line.startIndex, offsetBy: prefix.count)..<close]
            var values: [Substring: Substring] = [:]
            for pair in labels.split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { continue }
                values[parts[0]] = parts[1].drop { $0 == "\"" }.dropLast(parts[1].hasSuffix("\"") ? 1 : 0)
            }
            guard let key = label.map({ values[Substring($0)] }) ?? "", let le = values["le"],
                  let count = Double(line[line.index(after: close)...].trimmingPrefix(" ").split(separator: " ").first ?? "") else { continue }
            let bound = le == "+Inf" ? Double.infinity : Double(le)
            guard let bound else { continue }
            found[String(key), default: []].append(Bucket(bound: bound, count: count))
        }
        return found.mapValues(HistogramBuckets.init)
    }

    /// What was counted since `earlier` (the same series scraped before), bucket by bucket.
    public func since(_ earlier: HistogramBuckets?) -> HistogramBuckets {
        guard let earlier else { return self }
        return HistogramBuckets(buckets.map { bucket in
            Bucket(bound: bucket.bound, count: max(0, bucket.count - (earlier.buckets.first { $0.bound == bucket.bound }?.count ?? 0)))
        })
    }

    /// Both series' observations (the same bounds), e.g. of several nodes.
    public static func + (a: HistogramBuckets, b: HistogramBuckets) -> HistogramBuckets {
        if a.buckets.isEmpty { return b }
        if b.buckets.isEmpty { return a }
        return HistogramBuckets(a.buckets.map { bucket in
            Bucket(bound: bucket.bound, count: bucket.count + (b.buckets.first { $0.bound == bucket.bound }?.count ?? 0))
        })
    }

    /// The `q` quantile (0...1), interpolated linearly within its bucket; the highest finite
    /// bound when it falls in `+Inf`; nil with no observations.
    public func quantile(_ q: Double) -> Double? {
        guard total > 0 else { return nil }
        let rank = q * total
        var lower = 0.0, below = 0.0
        for bucket in buckets {
            if bucket.count >= rank {
                guard bucket.bound.isFinite else { return lower }
                let inBucket = bucket.count - below
                return inBucket > 0 ? lower + (bucket.bound - lower) * (rank - below) / inBucket : bucket.bound
            }
            lower = bucket.bound.isFinite ? bucket.bound : lower
            below = bucket.count
        }
        return lower
    }
}
