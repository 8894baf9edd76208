import HuddleControl
import HuddleCore

/// Writes a `message` event (CONTROL.md) straight into bytes: this runs for every delivered message
/// at every subscriber, so it makes no intermediate strings or JSON values.
enum MessageEvent {
    /// The whole line: `{"event":"message","cursor":N,...}` and a newline.
    static func line(_ m: WireMessage, reliable: Bool, cursor: Int64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(estimatedSize(m))
        write(m, reliable: reliable, cursor: cursor, into: &out)
        return out
    }

    /// Appends the whole line to `out`.
    static func write(_ m: WireMessage, reliable: Bool, cursor: Int64, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"event":"message","cursor":"#.utf8)
        JSON.writeDecimal(UInt64(cursor), into: &out)
        out.append(contentsOf: #","msg":""#.utf8)
        JSON.writeHex16(m.from.raw, into: &out)
        out.append(UInt8(ascii: "-"))
        JSON.writeDecimal(m.counter, into: &out)
        out.append(contentsOf: #"","from":""#.utf8)
        JSON.writeHex16(m.from.raw, into: &out)
        out.append(contentsOf: #"","seq":"#.utf8)
        if m.seq == 0 { out.append(contentsOf: "null".utf8) } else { JSON.writeDecimal(m.seq, into: &out) }
        out.append(contentsOf: #","deps":{"#.utf8)
        for (i, dep) in m.deps.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            JSON.writeHex16(dep.member.raw, into: &out)
            out.append(contentsOf: #"":"#.utf8)
            JSON.writeDecimal(dep.seq, into: &out)
        }
        out.append(contentsOf: #"},"to":"#.utf8)
        if let to = m.to {
            out.append(UInt8(ascii: "["))
            for (i, target) in to.enumerated() {
                out.append(contentsOf: i > 0 ? #",""#.utf8 : #"""#.utf8)
                JSON.writeHex16(target.raw, into: &out)
                out.append(UInt8(ascii: "\""))
            }
            out.append(UInt8(ascii: "]"))
        } else {
            out.append(contentsOf: "null".utf8)
        }
        out.append(contentsOf: reliable ? #","reliable":true,"data":""#.utf8 : #","reliable":false,"data":""#.utf8)
        Base64.encode(m.body, into: &out)
        out.append(UInt8(ascii: "\""))
        m.body.withUnsafeBufferPointer { body in
            guard isUTF8(body) else { return }
            out.append(contentsOf: #","text":"#.utf8)
            JSON.writeString(utf8: body, into: &out)
        }
        out.append(contentsOf: "}\n".utf8)
    }

    /// About the bytes of `m`'s line (base64 plus text of the body, ids, deps).
    static func estimatedSize(_ m: WireMessage) -> Int { 200 + m.body.count * 7 / 3 + m.deps.count * 40 }

    /// Whether `bytes` are valid UTF-8 (checked byte by byte only when not plain ASCII).
    private static func isUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var ascii: UInt8 = 0
        for b in bytes { ascii |= b }
        return ascii < 0x80 || String(validating: bytes, as: UTF8.self) != nil
    }
}
