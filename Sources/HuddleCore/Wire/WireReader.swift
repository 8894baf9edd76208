/// Reads what `WireWriter` wrote, checking every length against what is left before it slices.
public struct WireReader: Sendable {
    private let bytes: [UInt8]
    public private(set) var offset: Int

    public init(_ bytes: [UInt8], offset: Int = 0) { self.bytes = bytes; self.offset = offset }

    public var remaining: Int { bytes.count - offset }
    public var isAtEnd: Bool { offset >= bytes.count }

    private mutating func take(_ n: Int, _ what: String) throws(CoreError) -> ArraySlice<UInt8> {
        guard n >= 0, n <= remaining else { throw .truncated(what) }
        defer { offset += n }
        return bytes[offset..<offset + n]
    }

    public mutating func u8(_ what: String = "byte") throws(CoreError) -> UInt8 { try take(1, what).first ?? 0 }
    public mutating func u16(_ what: String = "u16") throws(CoreError) -> UInt16 {
        try take(2, what).reduce(0) { $0 << 8 | UInt16($1) }
    }
    public mutating func u32(_ what: String = "u32") throws(CoreError) -> UInt32 {
        try take(4, what).reduce(0) { $0 << 8 | UInt32($1) }
    }
    public mutating func u64(_ what: String = "u64") throws(CoreError) -> UInt64 {
        try take(8, what).reduce(0) { $0 << 8 | UInt64($1) }
    }
    /// The largest count a peer may send — a seq, message counter, incarnation or Lamport time:
    /// 2^53 − 1. No honest member gets near it (it counts one by one), it is exact in JSON and in a
    /// Double, and it leaves the cores room for their arithmetic on it (the next seq, a refutation's
    /// incarnation, a repair range) without overflow.
    public static let maximumCount: UInt64 = (1 << 53) - 1

    /// The largest count a member may claim to have *made* — its own seq in a hello or a message,
    /// a clock a sponsor hands a joiner, an incarnation on a member record or claim: 2^52. Honest
    /// members count these one by one from zero and never come near it; what other members make
    /// from such a value (the next seq to store from, a refutation's incarnation, a repair range)
    /// is at most a few more, and every decoder takes up to `maximumCount`. So whatever a core
    /// emits from a value it accepted is a value every peer decodes again. (Before: `hello(since:
    /// 2^53 − 1)` was taken, the node's next digest said `storedFrom` 2^53, and every peer refused
    /// its digests and dropped its links.)
    public static let madeCountLimit: UInt64 = 1 << 52

    /// A count (see `maximumCount`), refused when it is larger.
    public mutating func count(_ what: String) throws(CoreError) -> UInt64 {
        try count(what, atMost: Self.maximumCount)
    }

    /// A count its sender claims to have made (see `madeCountLimit`), refused when it is larger.
    public mutating func madeCount(_ what: String) throws(CoreError) -> UInt64 {
        try count(what, atMost: Self.madeCountLimit)
    }

    private mutating func count(_ what: String, atMost limit: UInt64) throws(CoreError) -> UInt64 {
        let n = try u64(what)
        guard n <= limit else { throw CoreError("\(what) \(n) is out of range (at most \(limit))") }
        return n
    }

    public mutating func raw(_ n: Int, _ what: String = "bytes") throws(CoreError) -> [UInt8] { Array(try take(n, what)) }
    public mutating func bytes16(_ what: String = "bytes") throws(CoreError) -> [UInt8] {
        let n = Int(try u16(what)); return try raw(n, what)
    }
    /// A 32-bit-length byte string, refused before allocation when longer than `limit`.
    public mutating func bytes32(limit: Int, _ what: String = "bytes") throws(CoreError) -> [UInt8] {
        let n = Int(try u32(what))
        guard n <= limit else { throw CoreError("\(what) of \(n) bytes exceeds the limit of \(limit)") }
        return try raw(n, what)
    }
    /// A 16-bit-length UTF-8 string, refused before it is read when longer than `limit` bytes.
    public mutating func string16(_ what: String = "string", limit: Int = Int(UInt16.max)) throws(CoreError) -> String {
        let n = Int(try u16(what))
        guard n <= limit else { throw CoreError("\(what) of \(n) bytes exceeds the limit of \(limit)") }
        let b = try raw(n, what)
        guard let s = String(validating: b, as: UTF8.self) else { throw CoreError("\(what) is not UTF-8") }
        return s
    }
    /// A signature field: empty, or at most `MemberInfo.maxSignature` bytes.
    public mutating func signature(_ what: String = "signature") throws(CoreError) -> [UInt8] {
        let bytes = try bytes16(what)
        guard bytes.count <= MemberInfo.maxSignature else { throw CoreError("\(what) of \(bytes.count) bytes") }
        return bytes
    }

    public mutating func member(_ what: String = "member") throws(CoreError) -> MemberID { MemberID(raw: try u64(what)) }
    /// A count of items each at least `minItemSize` bytes long, refused when the rest cannot hold that many.
    public mutating func count16(minItemSize: Int, _ what: String) throws(CoreError) -> Int {
        let n = Int(try u16(what))
        guard n * max(minItemSize, 1) <= remaining else { throw .truncated(what) }
        return n
    }
    /// Runs `body` on the bytes from `start` to the current offset (to hash what was just decoded).
    public func withBytes<R>(from start: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[start..<offset])) }
    }

    public func expectEnd(_ what: String) throws(CoreError) {
        guard isAtEnd else { throw CoreError("\(remaining) trailing bytes after \(what)") }
    }
}
