extension JSON {
    /// Parses strict RFC 8259 JSON. Checks every index before use, rejects trailing bytes, invalid
    /// UTF-8, bad escapes, lone surrogates and nesting deeper than 64. Never traps on any input.
    public static func parse(_ bytes: some Collection<UInt8>) throws(ControlError) -> JSON {
        try parse(Array(bytes))
    }

    /// Parses `bytes` in place (no copy).
    public static func parse(_ bytes: [UInt8]) throws(ControlError) -> JSON {
        var parser = JSONParser(bytes: bytes)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == parser.bytes.count else { throw parser.error("trailing characters after the JSON value") }
        return value
    }

    public static func parse(_ text: String) throws(ControlError) -> JSON { try parse(Array(text.utf8)) }
}

private struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    static let maximumDepth = 64

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// Why the text is not JSON, at the byte the parser stopped at (`ControlError.Code.notJSON`).
    func error(_ message: String) -> ControlError { ControlError(.notJSON, "\(message) at byte \(index)") }

    mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func value(depth: Int) throws(ControlError) -> JSON {
        guard depth <= Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw error("unexpected character")
        }
    }

    mutating func literal(_ word: StaticString) throws(ControlError) {
        let n = word.utf8CodeUnitCount
        guard index + n <= bytes.count else { throw error("unexpected end of input") }
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: n)
        guard bytes[index..<index + n].elementsEqual(expected) else { throw error("invalid literal") }
        index += n
    }

    mutating func object(depth: Int) throws(ControlError) -> JSON {
        index += 1
        var result = JSONObject()
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(result) }
        while true {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try string()
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipSpace()
            result[key] = try value(depth: depth + 1)
            skipSpace()
            guard index < bytes.count else { throw error("unexpected end of input in an object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(result) }
            throw error("expected ',' or '}'")
        }
    }

    mutating func array(depth: Int) throws(ControlError) -> JSON {
        index += 1
        var result: [JSON] = []
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(result) }
        while true {
            skipSpace()
            result.append(try value(depth: depth + 1))
            skipSpace()
            guard index < bytes.count else { throw error("unexpected end of input in an array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(result) }
            throw error("expected ',' or ']'")
        }
    }

    mutating func hex4() throws(ControlError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var v: UInt32 = 0
        for b in bytes[index..<index + 4] {
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: throw error("bad hex digit in \\u escape")
            }
            v = v << 4 | UInt32(d)
        }
        index += 4
        return v
    }

    mutating func string() throws(ControlError) -> String {
        index += 1
        // Most strings have no escape: find the closing quote and validate the bytes in place.
        let plainEnd: Int? = bytes.withUnsafeBufferPointer { buffer in
            var i = index
            while i < buffer.count {
                let b = buffer[i]
                if b == UInt8(ascii: "\"") { return i }
                if b == UInt8(ascii: "\\") || b < 0x20 { return nil }
                i += 1
            }
            return nil
        }
        if let end = plainEnd {
            let s = bytes.withUnsafeBufferPointer { String(validating: UnsafeBufferPointer(rebasing: $0[index..<end]), as: UTF8.self) }
            guard let s else { throw error("string is not valid UTF-8") }
            index = end + 1
            return s
        }
        var out: [UInt8] = []
        var start = index
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                out.append(contentsOf: bytes[start..<index])
                index += 1
                break
            }
            if b < 0x20 { throw error("control character in a string") }
            if b != UInt8(ascii: "\\") { index += 1; continue }
            out.append(contentsOf: bytes[start..<index])
            index += 1
            guard index < bytes.count else { throw error("truncated escape") }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("lone surrogate in \\u escape")
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("bad low surrogate in \\u escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw error("lone surrogate in \\u escape")
                }
                guard let u = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw error("bad escape")
            }
            start = index
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw error("string is not valid UTF-8") }
        return s
    }

    mutating func number() throws(ControlError) -> JSON {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.index
            while p.index < p.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.bytes[p.index]) { p.index += 1 }
            return p.index - s
        }
        guard index < bytes.count else { throw error("truncated number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            guard digits(&self) > 0 else { throw error("expected digits") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard digits(&self) > 0 else { throw error("expected digits after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits(&self) > 0 else { throw error("expected exponent digits") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let i = Int64(text) { return .int(i) }
        guard let d = Double(text), d.isFinite else { throw error("number out of range") }
        return .double(d)
    }
}
