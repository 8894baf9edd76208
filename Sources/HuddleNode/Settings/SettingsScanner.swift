/// Reads the bytes of a settings file for `SettingsFile.parse`, keeping the line number for errors.
struct SettingsScanner {
    let bytes: [UInt8]
    let file: String
    private(set) var index = 0
    private(set) var line = 1
    /// Nesting of arrays is refused beyond this (no `run` option takes a nested array).
    static let maximumDepth = 1

    init(bytes: [UInt8], file: String) {
        self.bytes = bytes
        self.file = file
    }

    var atEnd: Bool { index >= bytes.count }
    var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    func error(_ message: String) -> SettingError { SettingError(place: "\(file):\(line)", message: message) }

    mutating func advance() {
        if bytes[index] == 0x0A { line += 1 }
        index += 1
    }

    mutating func take(_ byte: UInt8) -> Bool {
        guard peek == byte else { return false }
        advance()
        return true
    }

    mutating func skipSpaces() {
        while let b = peek, b == 0x20 || b == 0x09 { advance() }
    }

    mutating func skipComment() {
        guard peek == UInt8(ascii: "#") else { return }
        while let b = peek, b != 0x0A { advance() }
    }

    /// Skips blank lines, comment lines and white space (new lines included).
    mutating func skipBlankLinesAndComments() {
        while let b = peek {
            if b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { advance() } else if b == UInt8(ascii: "#") { skipComment() } else { return }
        }
    }

    mutating func bareKey() throws(SettingError) -> String {
        let start = index
        while let b = peek, Self.isKeyByte(b) { advance() }
        guard index > start else { throw error("expected `key = value`") }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    static func isKeyByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == UInt8(ascii: "-") || b == UInt8(ascii: "_")
    }

    /// After a value: spaces, an optional comment, then a new line or the end.
    mutating func endOfLine(after key: String) throws(SettingError) {
        skipSpaces()
        skipComment()
        _ = take(0x0D)
        guard atEnd || take(0x0A) else { throw error("\(key): unexpected text after the value") }
    }

    mutating func value(for key: String, depth: Int = 0) throws(SettingError) -> SettingValue {
        guard let b = peek else { throw error("\(key): the value is missing") }
        switch b {
        case UInt8(ascii: "\""): return .string(try basicString(for: key))
        case UInt8(ascii: "'"): return .string(try literalString(for: key))
        case UInt8(ascii: "["):
            guard depth < Self.maximumDepth else { throw error("\(key): nested arrays are not used") }
            return try array(for: key, depth: depth + 1)
        default: return try bareValue(for: key)
        }
    }

    private mutating func array(for key: String, depth: Int) throws(SettingError) -> SettingValue {
        advance()  // [
        var items: [SettingValue] = []
        while true {
            skipBlankLinesAndComments()
            if take(UInt8(ascii: "]")) { return .array(items) }
            items.append(try value(for: key, depth: depth))
            skipBlankLinesAndComments()
            if take(UInt8(ascii: ",")) { continue }
            guard take(UInt8(ascii: "]")) else { throw error("\(key): expected `,` or `]` in the array") }
            return .array(items)
        }
    }

    private mutating func literalString(for key: String) throws(SettingError) -> String {
        advance()  // '
        let start = index
        while let b = peek, b != UInt8(ascii: "'") {
            guard b != 0x0A else { throw error("\(key): the string is not closed on its line") }
            advance()
        }
        guard !atEnd else { throw error("\(key): the string is not closed") }
        let text = try utf8(bytes[start..<index], key: key)
        advance()  // '
        return text
    }

    private mutating func basicString(for key: String) throws(SettingError) -> String {
        advance()  // "
        var out: [UInt8] = []
        while let b = peek {
            switch b {
            case UInt8(ascii: "\""):
                advance()
                return try utf8(out[...], key: key)
            case 0x0A: throw error("\(key): the string is not closed on its line")
            case UInt8(ascii: "\\"):
                advance()
                guard let e = peek else { break }
                advance()
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(e)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "u"):
                    guard index + 4 <= bytes.count, let code = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16),
                          let scalar = Unicode.Scalar(code) else { throw error("\(key): \\u needs 4 hex digits of a Unicode scalar") }
                    for _ in 0..<4 { advance() }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw error("\(key): unknown escape \\\(Character(Unicode.Scalar(e)))")
                }
            default:
                out.append(b)
                advance()
            }
        }
        throw error("\(key): the string is not closed")
    }

    private func utf8(_ slice: ArraySlice<UInt8>, key: String) throws(SettingError) -> String {
        guard let text = String(validating: slice, as: UTF8.self) else { throw error("\(key): the string is not valid UTF-8") }
        return text
    }

    /// An integer, a float, `true` or `false`: the bytes up to white space, `,`, `]` or `#`.
    private mutating func bareValue(for key: String) throws(SettingError) -> SettingValue {
        let start = index
        while let b = peek, !(b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D || b == UInt8(ascii: ",") || b == UInt8(ascii: "]") || b == UInt8(ascii: "#")) {
            advance()
        }
        let word = String(decoding: bytes[start..<index], as: UTF8.self)
        if word == "true" { return .bool(true) }
        if word == "false" { return .bool(false) }
        let digits = Self.withoutUnderscores(word)
        if let digits, let n = Int(digits) { return .integer(n) }
        if let digits, digits.allSatisfy({ "0123456789+-.eE".contains($0) }), digits.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }), let x = Double(digits), x.isFinite { return .float(x) }
        throw error("\(key): \(word.isEmpty ? "the value is missing" : "\(word) is not a value (strings are quoted: \"\(word)\")")")
    }

    /// `1_000` as `1000`; nil when an underscore is not between two digits.
    static func withoutUnderscores(_ word: String) -> String? {
        let chars = Array(word)
        for (i, c) in chars.enumerated() where c == "_" {
            guard i > 0, i + 1 < chars.count, chars[i - 1].isNumber, chars[i + 1].isNumber else { return nil }
        }
        return String(chars.filter { $0 != "_" })
    }
}
