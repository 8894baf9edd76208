import HuddleCore

extension NodeStateStore {
    /// This member's broadcasts stored by one commit, `first...last` by seq, written as one record:
    /// `data` holds each one's length (4 bytes, big-endian) and then its encoding
    /// (`SignedMessage.encoded()`), in seq order. A record per message made every commit rewrite
    /// the B-tree's pages at both ends of the table (the new messages, and the acknowledged ones
    /// dropped): at the 256 B row's sender SQLite wrote 29 MB a second to its WAL for about 8 MB
    /// of records (strace). Whole records are dropped instead, once `ownFrom` passed their last.
    struct OwnBatch: Sendable {
        var first: Int64
        var last: Int64
        var data: [UInt8]

        /// Most bytes of one batch past its first message: a commit of large messages writes
        /// several, so it never holds them all in one buffer (and its copy for SQLite) at once.
        static let batchBytes = 256 << 10

        /// `messages` (in seq order) as one batch; nil when there are none.
        init?(_ messages: some Collection<SignedMessage>) {
            guard let head = messages.first else { return nil }
            first = Int64(clamping: head.message.seq)
            last = first
            data = []
            for signed in messages { append(signed, signed.encoded()) }
        }

        /// `messages` (in seq order) as batches of about `batchBytes` each.
        static func batches(_ messages: [SignedMessage]) -> [OwnBatch] {
            var out: [OwnBatch] = []
            for signed in messages {
                let bytes = signed.encoded()
                if var current = out.last, current.data.count < batchBytes {
                    out.removeLast()
                    current.append(signed, bytes)
                    out.append(current)
                } else {
                    var batch = OwnBatch(first: Int64(clamping: signed.message.seq), last: 0, data: [])
                    batch.append(signed, bytes)
                    out.append(batch)
                }
            }
            return out
        }

        private mutating func append(_ signed: SignedMessage, _ bytes: [UInt8]) {
            withUnsafeBytes(of: UInt32(clamping: bytes.count).bigEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: bytes)
            last = Int64(clamping: signed.message.seq)
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
                guard seq >= first, seq <= last, seq > Int64(clamping: out.last?.message.seq ?? 0) || out.isEmpty else { return nil }
                out.append(signed)
                at += length
            }
            return out.isEmpty ? nil : out
        }
    }
}
