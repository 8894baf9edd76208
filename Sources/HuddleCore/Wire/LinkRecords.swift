/// Splits a link message into records that each fit one Noise transport frame (≤ 65,535 bytes with
/// its 16-byte tag), and joins them again. A record is `flags (1) | fragment`; flag bit 0 means
/// "more records of this message follow"; bit 1 (`rekeyFlag`) is the link ciphers' (`LinkSealer`),
/// removed by `LinkOpener` before records reach the reassembler.
public enum LinkRecords {
    /// Largest plaintext record: 65,535 − 16 (AEAD tag).
    public static let maximumRecord = 65_535 - 16
    public static let maximumFragment = maximumRecord - 1
    /// "The sender's key moves on after this record" (Noise REKEY): see `LinkSealer`.
    public static let rekeyFlag: UInt8 = 2

    public static func split(_ message: [UInt8]) -> [[UInt8]] {
        var records: [[UInt8]] = []
        var start = 0
        repeat {
            let end = min(start + maximumFragment, message.count)
            var record = [UInt8]()
            record.reserveCapacity(end - start + 1)
            record.append(end < message.count ? 1 : 0)
            record.append(contentsOf: message[start..<end])
            records.append(record)
            start = end
        } while start < message.count
        return records
    }
}

/// Joins records back into messages, refusing (before it grows) any message longer than its limit.
public struct LinkReassembler: Sendable {
    public let limit: Int
    private var pending: [UInt8] = []

    public init(limit: Int) { self.limit = limit }

    /// Returns the whole message when `record` completes one, nil while more records are due.
    public mutating func add(_ record: [UInt8]) throws(CoreError) -> [UInt8]? {
        guard let flags = record.first else { throw CoreError("empty link record") }
        guard flags & ~1 == 0 else { throw CoreError("bad link record flags") }
        guard pending.count + record.count - 1 <= limit else {
            pending = []
            throw CoreError("link message exceeds \(limit) bytes")
        }
        pending.append(contentsOf: record.dropFirst())
        guard flags == 0 else { return nil }
        defer { pending = [] }
        return pending
    }
}
