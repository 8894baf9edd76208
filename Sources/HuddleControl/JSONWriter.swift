extension JSON {
    /// Compact serialization: no spaces, keys in insertion order, RFC 8259 escapes,
    /// integers as integers, doubles in shortest round-trip form (non-finite as null).
    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case let .bool(b): out.append(contentsOf: b ? Array("true".utf8) : Array("false".utf8))
        case let .int(i): out.append(contentsOf: String(i).utf8)
        case let .double(d):
            if d.isFinite { out.append(contentsOf: "\(d)".utf8) } else { out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }
        case let .string(s): JSON.writeString(s, into: &out)
        case let .array(items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case let .object(object):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (key, value) in object {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                JSON.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    public var serialized: String {
        var out: [UInt8] = []
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func writeString(_ s: String, into out: inout [UInt8]) {
        var s = s
        s.withUTF8 { writeString(utf8: $0, into: &out) }
    }

    /// Writes `bytes` (valid UTF-8, which the caller has checked) as a JSON string: quoted, with
    /// runs that need no escape copied in one go.
    public static func writeString(utf8 bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var start = 0
        for i in 0..<bytes.count where bytes[i] < 0x20 || bytes[i] == 0x22 || bytes[i] == 0x5C {
            if i > start { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i])) }
            escape(bytes[i], into: &out)
            start = i + 1
        }
        if bytes.count > start { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<bytes.count])) }
        out.append(UInt8(ascii: "\""))
    }

    /// Writes `value` in decimal, without making a String.
    public static func writeDecimal(_ value: UInt64, into out: inout [UInt8]) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        var n = value, count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(n % 10)
                n /= 10
                count += 1
            } while n > 0
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }

    /// Writes `value` as 16 lowercase hex digits (the text form of a member id), without making a String.
    public static func writeHex16(_ value: UInt64, into out: inout [UInt8]) {
        for shift in stride(from: 60, through: 0, by: -4) { out.append(hexDigits[Int(value >> UInt64(shift) & 0xF)]) }
    }

    @inline(__always)
    private static func escape(_ b: UInt8, into out: inout [UInt8]) {
        switch b {
        case 0x22: out.append(0x5C); out.append(0x22)
        case 0x5C: out.append(0x5C); out.append(0x5C)
        case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
        case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
        case 0..<0x20:
            out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hexDigits[Int(b >> 4)], hexDigits[Int(b & 0xF)]])
        default: out.append(b)
        }
    }
}
