import HuddleCore

/// What the simulator counts while it runs; turned into a `SimReport` at the end.
struct SimMetrics: Sendable {
    var events = 0
    var decodeFailures = 0
    var joinTimes: [Double?]
    var crashTimes: [Double?]
    var leaveTimes: [Double?]
    /// Per target: the latest time an observer that joined no later than the target first saw it.
    var lastSeenByEarlier: [Double?]
    /// (observer, crashed target) -> when the observer marked it failed.
    var failedAt: [Int: [Int: Double]] = [:]
    var falsePositives = 0
    var partitionFailures = 0
    var lastPartitionFailure: Double?
    var falseSuspicions = 0
    var leftReports = 0
    var leftReportedFailed = 0
    var datagrams = 0
    var datagramBytes = 0
    var pushPullBytes = 0
    var largestDatagram = 0

    init(nodes: Int) {
        joinTimes = Array(repeating: nil, count: nodes)
        crashTimes = Array(repeating: nil, count: nodes)
        leaveTimes = Array(repeating: nil, count: nodes)
        lastSeenByEarlier = Array(repeating: nil, count: nodes)
    }

    mutating func countDatagram(bytes: Int, at now: Double, from: Double) {
        largestDatagram = max(largestDatagram, bytes)
        guard now >= from else { return }
        datagrams += 1
        datagramBytes += bytes
    }

    mutating func countPushPull(bytes: Int, at now: Double, from: Double) {
        guard now >= from else { return }
        pushPullBytes += bytes
    }

    mutating func record(_ change: MemberChange, observer: Int, target: Int, at now: Double, targetLive: Bool, acrossPartition: Bool) {
        switch change {
        case .joined:
            if let tj = joinTimes[target], let to = joinTimes[observer], to <= tj {
                lastSeenByEarlier[target] = max(lastSeenByEarlier[target] ?? now, now)
            }
        case .failed:
            if crashTimes[target] != nil {
                failedAt[target, default: [:]][observer] = failedAt[target]?[observer] ?? now
            } else if leaveTimes[target] != nil {
                leftReportedFailed += 1
            } else if acrossPartition {
                partitionFailures += 1
                lastPartitionFailure = now
            } else if targetLive {
                falsePositives += 1
            }
        case .suspect:
            if crashTimes[target] == nil, leaveTimes[target] == nil, !acrossPartition { falseSuspicions += 1 }
        case .left:
            leftReports += 1
        case .alive, .updated, .removed, .path:
            break
        }
    }
}

extension Simulation {
    /// The figures at the current virtual time.
    public func report(wallSeconds: Double) -> SimReport {
        let live = nodes.indices.filter { nodes[$0].isLive }
        // Join convergence: for members that joined, until every earlier member saw them.
        var joins: [Double] = []
        for i in nodes.indices {
            guard let tj = metrics.joinTimes[i], let seen = metrics.lastSeenByEarlier[i] else { continue }
            joins.append(seen - tj)
        }
        // Crash detection: every running member that knew the crashed member must hold it failed.
        var detections: [Double] = [], firsts: [Double] = []
        var detected = 0
        let crashed = nodes.indices.filter { metrics.crashTimes[$0] != nil }
        for c in crashed {
            guard let tc = metrics.crashTimes[c] else { continue }
            let marks = metrics.failedAt[c] ?? [:]
            if let first = marks.values.min() { firsts.append(first - tc) }
            var last = tc, complete = true
            for o in live where o != c {
                guard let seen = nodes[o].instance.members[ids[c]] else { continue }
                if seen.state == .failed, let t = marks[o] { last = max(last, t) } else { complete = false }
            }
            if complete { detected += 1; detections.append(last - tc) }
        }
        // Final views: sampled observers for very large runs (the check is O(N²)).
        var mismatches = 0
        let observers = live.count > 2000 ? Array(live.prefix(200)) : live
        for o in observers {
            let view = nodes[o].instance.members
            for p in live where p != o && view[ids[p]]?.state != .alive { mismatches += 1 }
        }
        let window = max(scenario.duration - scenario.measureFrom, 1e-9)
        let members = Double(max(1, nodes.count))
        return SimReport(
            nodes: nodes.count, seed: scenario.seed, duration: scenario.duration, loss: scenario.loss,
            joinConvergence: .init(joins), crashes: crashed.count, crashesDetected: detected,
            detection: .init(detections), firstDetection: .init(firsts),
            falsePositives: metrics.falsePositives, partitionFailures: metrics.partitionFailures,
            partitionSplit: metrics.lastPartitionFailure.flatMap { last in scenario.partitions.first.map { last - $0.start } },
            falseSuspicions: metrics.falseSuspicions,
            leftReports: metrics.leftReports, leftReportedFailed: metrics.leftReportedFailed,
            viewsConverged: mismatches == 0, viewMismatches: mismatches,
            messagesPerMemberSecond: Double(metrics.datagrams) / members / window,
            bytesPerMemberSecond: Double(metrics.datagramBytes) / members / window,
            pushPullBytesPerMemberSecond: Double(metrics.pushPullBytes) / members / window,
            largestDatagram: metrics.largestDatagram, events: metrics.events, wallSeconds: wallSeconds,
            traceDigest: trace?.digest, traceRecords: trace?.records)
    }
}
