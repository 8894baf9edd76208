/// Broadcast seqs count every broadcast of an origin — journal entries too — but the control
/// protocol numbers an origin's *messages*: "seq increasing by exactly one" (CONTROL.md). This
/// maps one to the other: a message's application seq is its broadcast seq minus the origin's
/// non-application broadcasts (journal entries) at or below it.
///
/// Guarantees: every member gives one message the same application seq, and an origin's messages
/// delivered here have application seqs increasing by exactly one from the application baseline.
/// For that, the count of an origin's non-application broadcasts at a member's starting point is
/// learned with it (the sponsor's `baseline`, the origin's `hello`); past that point this member
/// counts the ones it delivers. Below its starting point (only ever a dependency, which the
/// protocol promises is covered by the baseline) it subtracts the count at the starting point,
/// which never exceeds the application baseline. Memory: one seq per journal entry per origin.
public struct ApplicationSeqs: Sendable, Equatable {
    struct Origin: Sendable, Equatable {
        /// The broadcast seq up to which the count is exact, and the count there.
        var base: UInt64 = 0
        var countAtBase: UInt64 = 0
        /// Non-application broadcast seqs above `base`, ascending.
        var after: [UInt64] = []

        func count(upTo seq: UInt64) -> UInt64 {
            guard seq >= base else { return countAtBase }
            var low = 0, high = after.count
            while low < high {
                let mid = (low + high) / 2
                if after[mid] <= seq { low = mid + 1 } else { high = mid }
            }
            return countAtBase + UInt64(low)
        }
    }

    private var origins: [MemberID: Origin] = [:]

    public init() {}

    /// Non-application broadcasts of `origin` at or below `seq` (what a hello or baseline tells).
    public func nonApplication(_ origin: MemberID, upTo seq: UInt64) -> UInt64 {
        origins[origin]?.count(upTo: seq) ?? 0
    }

    /// `m` as the control protocol shows it: its seq and its dependencies' seqs in application seqs.
    public func view(_ m: WireMessage) -> WireMessage {
        var shown = m
        if m.seq != 0 { shown.seq = applicationSeq(m.origin, m.seq) }
        if m.deps.contains(where: { applicationSeq($0.member, $0.seq) != $0.seq }) {
            shown.deps = m.deps.map { WireMessage.Dependency(member: $0.member, seq: applicationSeq($0.member, $0.seq)) }
        }
        return shown
    }

    /// The application seq of `origin`'s broadcast `seq` (0 stays 0).
    public func applicationSeq(_ origin: MemberID, _ seq: UInt64) -> UInt64 {
        let count = nonApplication(origin, upTo: seq)
        return seq > count ? seq - count : 0
    }

    /// This member's starting point for `origin` is broadcast seq `seq`, where `count` of its
    /// broadcasts were not messages. Counts past the new starting point are kept.
    public mutating func start(_ origin: MemberID, at seq: UInt64, count: UInt64) {
        var o = origins[origin] ?? Origin()
        guard o.after.isEmpty ? seq >= o.base : seq > o.base else { return }
        o.after.removeAll { $0 <= seq }
        o.base = seq
        // A peer's count can never exceed the seq it counts to.
        o.countAtBase = min(count, seq)
        origins[origin] = o
    }

    /// `origin`'s broadcasts `from...to` are given up on (a gap), with `count` of its broadcasts
    /// through `to` not messages (signed by the origin; nil when unknown: all taken as messages).
    /// Returns the application seqs lost, nil when none was a message. The count is kept within
    /// what the gap allows (at least the count before it, at most that plus its length), so the
    /// application seqs after it keep increasing whatever an origin signed.
    public mutating func skip(_ origin: MemberID, from: UInt64, to: UInt64, nonApplicationThrough count: UInt64?) -> ClosedRange<UInt64>? {
        guard from >= 1, to >= from else { return nil }
        let before = nonApplication(origin, upTo: from - 1)
        let through = min(max(count ?? before, before), before + (to - from + 1), to)
        let first = (from - 1) - min(before, from - 1) + 1, last = to - through
        start(origin, at: to, count: through)
        return last >= first ? first...last : nil
    }

    /// `origin`'s broadcast `seq` is not a message (a journal entry), delivered here or made here.
    public mutating func noteNonApplication(_ origin: MemberID, _ seq: UInt64) {
        var o = origins[origin] ?? Origin()
        guard seq > o.base, !(o.after.last.map { $0 >= seq } ?? false) else { return }
        o.after.append(seq)
        origins[origin] = o
    }
}
