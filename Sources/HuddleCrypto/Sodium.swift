import CSodium

/// libsodium's one-time initialisation; every API here calls it, so callers never have to.
public enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0
    public static func initialize() { _ = initialized }
}

/// Bytes from the operating system's secure random source.
public enum SecureRandom {
    public static func bytes(_ n: Int) -> [UInt8] {
        Sodium.initialize()
        var out = [UInt8](repeating: 0, count: n)
        out.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, buffer.count) }
        }
        return out
    }

    public static func uint64() -> UInt64 {
        bytes(8).reduce(0) { $0 << 8 | UInt64($1) }
    }
}

/// Lowercase hex of `bytes`.
public func hexString(_ bytes: some Collection<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0xF)]) }
    return String(decoding: out, as: UTF8.self)
}

/// The bytes of a hex string (either case); nil when it is not hex or has an odd length.
public func bytesFromHex(_ s: String) -> [UInt8]? {
    let utf8 = Array(s.utf8)
    guard utf8.count % 2 == 0 else { return nil }
    func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        case 0x41...0x46: c - 0x41 + 10
        default: nil
        }
    }
    var out = [UInt8]()
    out.reserveCapacity(utf8.count / 2)
    var i = 0
    while i < utf8.count {
        guard let hi = nibble(utf8[i]), let lo = nibble(utf8[i + 1]) else { return nil }
        out.append(hi << 4 | lo)
        i += 2
    }
    return out
}
