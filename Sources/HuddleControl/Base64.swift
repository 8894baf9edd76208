/// Standard base64 (RFC 4648, with padding) written straight into a byte buffer.
public enum Base64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Appends the encoding of `src` to `out`: one resize, then raw pointer writes (this runs for
    /// every message event a JSON-lines subscriber is sent, so it is on the hot path).
    public static func encode(_ src: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        let length = (src.count + 2) / 3 * 4
        guard length > 0 else { return }
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: length))
        alphabet.withUnsafeBufferPointer { table in
            out.withUnsafeMutableBufferPointer { whole in
                let dst = UnsafeMutableBufferPointer(rebasing: whole[start...])
                var i = 0, o = 0
                while i + 3 <= src.count {
                    let n = UInt32(src[i]) << 16 | UInt32(src[i + 1]) << 8 | UInt32(src[i + 2])
                    dst[o] = table[Int(n >> 18 & 63)]
                    dst[o + 1] = table[Int(n >> 12 & 63)]
                    dst[o + 2] = table[Int(n >> 6 & 63)]
                    dst[o + 3] = table[Int(n & 63)]
                    i += 3
                    o += 4
                }
                let rest = src.count - i
                if rest > 0 {
                    let n = UInt32(src[i]) << 16 | (rest == 2 ? UInt32(src[i + 1]) << 8 : 0)
                    dst[o] = table[Int(n >> 18 & 63)]
                    dst[o + 1] = table[Int(n >> 12 & 63)]
                    dst[o + 2] = rest == 2 ? table[Int(n >> 6 & 63)] : UInt8(ascii: "=")
                    dst[o + 3] = UInt8(ascii: "=")
                }
            }
        }
    }
}
