import HuddleCore

/// One delivery as a member reported it (a `message` event of the control protocol).
public struct DeliveryRecord: Sendable, Equatable {
    public var msg: String
    public var from: String
    /// Broadcast seq, nil for directed sends.
    public var seq: UInt64?
    public var deps: [String: UInt64]
    /// For a `gap` event instead of a message: the seqs of `from` it says will never be delivered.
    public var lost: ClosedRange<UInt64>?
    public init(msg: String, from: String, seq: UInt64?, deps: [String: UInt64]) {
        self.msg = msg; self.from = from; self.seq = seq; self.deps = deps
    }

    /// A `gap` event: `from`'s messages `lost` will never be delivered at this member.
    public static func gap(from: String, lost: ClosedRange<UInt64>) -> DeliveryRecord {
        var record = DeliveryRecord(msg: "gap \(from) \(lost.lowerBound)...\(lost.upperBound)", from: from, seq: nil, deps: [:])
        record.lost = lost
        return record
    }
}

/// What one member delivered, in order, from which baseline, and whether it stayed in the session.
public struct DeliveryLog: Sendable {
    public var member: String
    public var baseline: [String: UInt64]
    public var deliveries: [DeliveryRecord]
    public var stayed: Bool
    public init(member: String, baseline: [String: UInt64], deliveries: [DeliveryRecord], stayed: Bool) {
        self.member = member; self.baseline = baseline; self.deliveries = deliveries; self.stayed = stayed
    }
}

/// Checks the messaging guarantees from delivery logs alone (CONTROL.md, "Guarantees a checker may
/// rely on"): no duplicates; from each origin, seq increasing by exactly one after the baseline;
/// every dependency delivered first (or covered by the baseline); and no loss among members that
/// stayed — a broadcast any of them delivered, every other delivered too (unless it came before
/// that member's baseline).
public enum DeliveryChecker {
    public static func violations(_ logs: [DeliveryLog]) -> [String] {
        var problems: [String] = []
        for log in logs {
            var last = log.baseline
            var seen = Set<String>()
            for d in log.deliveries {
                if let lost = d.lost {
                    // A gap event: the seqs it names are passed over, starting where the next was due.
                    let expected = (last[d.from] ?? 0) + 1
                    if lost.lowerBound != expected { problems.append("\(log.member): \(d.msg) where \(d.from) seq \(expected) was due") }
                    last[d.from] = max(last[d.from] ?? 0, lost.upperBound)
                    continue
                }
                if !seen.insert(d.msg).inserted { problems.append("\(log.member): \(d.msg) delivered twice") }
                for (origin, s) in d.deps where !(origin == d.from && d.seq.map { s < $0 } == true) {
                    if s > (last[origin] ?? 0) { problems.append("\(log.member): \(d.msg) delivered before its dependency \(origin)#\(s)") }
                }
                guard let seq = d.seq else { continue }
                let expected = (last[d.from] ?? 0) + 1
                if seq != expected { problems.append("\(log.member): \(d.from) seq \(seq) delivered where \(expected) was due") }
                last[d.from] = max(last[d.from] ?? 0, seq)
            }
        }
        let stayed = logs.filter(\.stayed)
        var everywhere: [String: (from: String, seq: UInt64)] = [:]
        for log in stayed { for d in log.deliveries { if let seq = d.seq { everywhere[d.msg] = (d.from, seq) } } }
        for log in stayed {
            let have = Set(log.deliveries.map(\.msg))
            let lost = log.deliveries.compactMap { d in d.lost.map { (d.from, $0) } }
            func named(_ origin: (from: String, seq: UInt64)) -> Bool { lost.contains { $0.0 == origin.from && $0.1.contains(origin.seq) } }
            for (msg, origin) in everywhere where !have.contains(msg) && origin.seq > (log.baseline[origin.from] ?? 0) && !named(origin) {
                problems.append("\(log.member) never delivered \(msg), which another member that stayed delivered")
            }
        }
        return problems
    }
}
