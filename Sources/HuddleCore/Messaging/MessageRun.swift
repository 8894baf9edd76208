/// One origin's stored messages: a run of consecutive seqs, appended at the end as they are
/// delivered and dropped from the front once every member has them.
///
/// Guarantees: lookups and appends are O(1); dropping a prefix touches only what it drops (a
/// dictionary iterated while it is changed copies itself whole), and releases it at once: the run
/// keeps alive exactly the messages it counts. (Dropped messages left in the array until it was
/// compacted, 1,024 of them or more, kept alive bodies that the store no longer counted: in the
/// 16 KiB throughput benchmark, 26.5 MiB of bodies at a sender whose store was at its 16 MiB limit.)
/// An append that does not continue the run (the origin's earlier messages were not kept) starts
/// a new run.
struct MessageRun: Sendable {
    /// Nil from the front up to `head`: slots of dropped messages, until the array is compacted.
    private var items: [SignedMessage?] = []
    private var head = 0
    /// Seq of the first stored message (meaningful when not empty).
    private(set) var firstSeq: UInt64 = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { head == items.count }
    /// The seq an append must have to continue the run.
    var nextSeq: UInt64 { firstSeq + UInt64(count) }

    /// Appends `signed`; returns the bytes of messages dropped because the run had to restart.
    mutating func append(_ signed: SignedMessage, bytes: (SignedMessage) -> Int) -> Int {
        var dropped = 0
        if isEmpty || signed.message.seq != nextSeq {
            for case let item? in items[head...] { dropped += bytes(item) }
            items.removeAll(keepingCapacity: true)
            head = 0
            firstSeq = signed.message.seq
        }
        items.append(signed)
        return dropped
    }

    subscript(seq: UInt64) -> SignedMessage? {
        guard seq >= firstSeq, seq < nextSeq else { return nil }
        return items[head + Int(seq - firstSeq)]
    }

    /// Drops every message with seq ≤ `stable`; returns the bytes they held.
    mutating func drop(through stable: UInt64, bytes: (SignedMessage) -> Int) -> Int {
        guard !isEmpty, stable >= firstSeq else { return 0 }
        let n = Int(min(stable - firstSeq + 1, UInt64(count)))
        var freed = 0
        for i in head..<head + n {
            if let item = items[i] { freed += bytes(item) }
            items[i] = nil
        }
        head += n
        firstSeq += UInt64(n)
        if head == items.count {
            items.removeAll(keepingCapacity: items.capacity <= 4096)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return freed
    }
}
