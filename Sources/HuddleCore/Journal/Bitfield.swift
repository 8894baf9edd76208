/// Which chunks of an attachment a member holds (or offers): one bit per chunk.
public struct Bitfield: Sendable, Equatable {
    public private(set) var bytes: [UInt8]
    public let count: Int

    public init(count: Int, full: Bool = false) {
        self.count = count
        bytes = [UInt8](repeating: full ? 0xFF : 0, count: (count + 7) / 8)
        if full, count % 8 != 0, !bytes.isEmpty { bytes[bytes.count - 1] = UInt8((1 << (count % 8)) - 1) }
    }

    public init?(bytes: [UInt8], count: Int) {
        guard bytes.count == (count + 7) / 8 else { return nil }
        if count % 8 != 0, let last = bytes.last, last >> (count % 8) != 0 { return nil }
        self.bytes = bytes
        self.count = count
    }

    public subscript(index: Int) -> Bool {
        get { index >= 0 && index < count && bytes[index / 8] & (1 << (index % 8)) != 0 }
        set {
            guard index >= 0 && index < count else { return }
            if newValue { bytes[index / 8] |= 1 << (index % 8) } else { bytes[index / 8] &= ~(1 << (index % 8)) }
        }
    }

    public var setCount: Int { bytes.reduce(0) { $0 + $1.nonzeroBitCount } }
    public var isFull: Bool { setCount == count }
}
