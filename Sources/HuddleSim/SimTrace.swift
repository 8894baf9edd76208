/// A running digest of everything a simulated run did, to compare runs across processes.
///
/// Guarantees: the digest is a pure function of the records appended and their order — 64-bit
/// FNV-1a over a fixed little-endian encoding, with nothing taken from the process's hash seed — so
/// two runs agree exactly when they made the same deliveries and decisions at the same virtual
/// times. `huddle-sim --trace-digest` prints it; a test compares it between child processes.
public struct SimTrace: Sendable, Equatable {
    /// What a record is about (part of the digest, so equal fields of different kinds differ).
    public enum Kind: UInt8, Sendable {
        case datagram = 1, pushPullRequest, pushPullReply, memberChange, crash, pause, resume, leave, start
        case delivery, repairRequest, membersSet, join
        case linkUp, linkDown, chunk, epoch
    }

    /// How many records went in.
    public private(set) var records = 0
    private var hash: UInt64 = 0xcbf2_9ce4_8422_2325

    public init() {}

    /// The digest as 16 hex digits.
    public var digest: String {
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Appends one record: its kind, the virtual time (exact bits), its numbers, and bytes.
    public mutating func record(_ kind: Kind, at time: Double, _ fields: UInt64..., bytes: [UInt8] = []) {
        records += 1
        mix(UInt64(kind.rawValue))
        mix(time.bitPattern)
        mix(UInt64(fields.count))
        for field in fields { mix(field) }
        mix(UInt64(bytes.count))
        for byte in bytes { mixByte(byte) }
    }

    private mutating func mix(_ value: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { mixByte(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    private mutating func mixByte(_ byte: UInt8) {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01b3
    }
}
