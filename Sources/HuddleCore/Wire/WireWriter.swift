/// Appends big-endian integers, length-prefixed strings and byte strings to one growing buffer.
public struct WireWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Empties the buffer, keeping its capacity (for a writer reused across many small encodings).
    public mutating func reset() { bytes.removeAll(keepingCapacity: true) }

    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    public mutating func u16(_ v: UInt16) { bytes.append(UInt8(v >> 8)); bytes.append(UInt8(truncatingIfNeeded: v)) }
    public mutating func u32(_ v: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt32(shift))) }
    }
    public mutating func u64(_ v: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: v >> UInt64(shift))) }
    }
    public mutating func raw(_ v: some Collection<UInt8>) { bytes.append(contentsOf: v) }
    /// A byte string of at most 65,535 bytes with a 16-bit length (longer input is cut: callers bound it first).
    public mutating func bytes16(_ v: some Collection<UInt8>) {
        let n = min(v.count, Int(UInt16.max))
        u16(UInt16(n)); bytes.append(contentsOf: v.prefix(n))
    }
    /// A byte string with a 32-bit length.
    public mutating func bytes32(_ v: some Collection<UInt8>) { u32(UInt32(truncatingIfNeeded: v.count)); bytes.append(contentsOf: v) }
    public mutating func string16(_ s: String) { bytes16(Array(s.utf8)) }
    public mutating func member(_ m: MemberID) { u64(m.raw) }
}
