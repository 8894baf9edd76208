import HuddleCore

extension NodeStateStore {
    /// This member's broadcasts stored by one commit, `first...last` by seq, written as one record:
    /// `data` holds each one's length (4 bytes, big-endian) and then its encoding
    /// (`SignedMessage.encoded()`), in seq order. A record per message made every commit rewrite
    /// the B-tree's pages at both ends of the table (the new messages, and the acknowledged ones
    /// dropped). Whole records are dropped instead, once `ownFrom` passed their last. With
    /// `secure_delete=FAST`, the 256 B row's sender wrote 3.9–4.9 bytes to the WAL per byte of
    /// spooled events instead of 6.3–6.7 (strace over 2 s; this change or FAST alone: 6.3 and 6.7).
    struct OwnBatch: Sendable {
        var first: Int64
        var last: Int64
        var data: [UInt8]

        /// Most bytes of one batch past its first message: a commit of large messages writes
        /// several, so it never holds them all in one buffer (and its copy for SQLite) at once.
        static let batchBytes = 256 << 10

        /// `messages` (in seq order) as batches of about `batchBytes` each.
        static func batches(_ messages: [SignedMessage]) -> [OwnBatch] {
            var out: [OwnBatch] = []
            for signed in messages {
                let seq = Int64(clamping: signed.message.seq)
                if out.last.map({ $0.data.count >= batchBytes }) ?? true { out.append(OwnBatch(first: seq, last: seq, data: [])) }
                let bytes = signed.encoded()
                withUnsafeBytes(of: UInt32(clamping: bytes.count).bigEndian) { out[out.count - 1].data.append(contentsOf: $0) }
                out[out.count - 1].data.append(contentsOf: bytes)
                out[out.count - 1].last = seq
            }
            return out
        }

        init(first: Int64, last: Int64, data: [UInt8]) {
            self.first = first
            self.last = last
            self.data = data
        }

        /// Its messages; nil unless `data` holds whole encodings only, each a message whose seq is
        /// within `first...last` and above the one before it.
        func messages() -> [SignedMessage]? {
            guard first <= last else { return nil }
            var out: [SignedMessage] = []
            var at = 0
            while at < data.count {
                guard data.count - at >= 4 else { return nil }
                let length = data[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) }
                at += 4
                guard length <= data.count - at, let signed = try? SignedMessage.decode(Array(data[at..<(at + length)])) else { return nil }
                let seq = Int64(clamping: signed.message.seq)
                guard seq >= first, seq <= last, out.last.map({ seq > Int64(clamping: $0.message.seq) }) ?? true else { return nil }
                out.append(signed)
                at += length
            }
            return out.isEmpty ? nil : out
        }
    }
}
