/// Where each top-level key of a settings file is, for its error line: TOMLKit gives the line of a
/// parse error, not of a key. Read off a file toml++ already took: the first line that starts (after
/// spaces) with the key, bare or quoted, followed by `=` or `.` (a dotted key), or a table header
/// `[key]` / `[key.…]`; lines inside multi-line strings are skipped. Nil when none does.
struct SettingsKeyLines {
    /// Per line (1-based), its first key token, or nil.
    private var firstKey: [String: Int] = [:]

    init(_ text: String) {
        var inString: Substring?
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.drop { $0 == " " || $0 == "\t" }
            if let delimiter = inString {
                if Self.count(delimiter, in: line) % 2 == 1 { inString = nil }
                continue
            }
            if let key = Self.key(starting: line), firstKey[key] == nil { firstKey[key] = index + 1 }
            for delimiter in ["\"\"\"", "'''"] where Self.count(delimiter[...], in: line) % 2 == 1 { inString = delimiter[...] }
        }
    }

    func line(of key: String) -> Int? { firstKey[key] }

    /// The key a line starts with: `key =`, `key.sub =`, `"key" =`, `[key]`, `[key.sub]`.
    private static func key(starting line: Substring) -> String? {
        var rest = line
        if rest.first == "[" { rest = rest.dropFirst().drop { $0 == "[" || $0 == " " || $0 == "\t" } }
        let key: Substring
        if let quote = rest.first, quote == "\"" || quote == "'" {
            let body = rest.dropFirst()
            guard let end = body.firstIndex(of: quote) else { return nil }
            key = body[..<end]
            rest = body[body.index(after: end)...]
        } else {
            key = rest.prefix { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
            guard !key.isEmpty else { return nil }
            rest = rest.dropFirst(key.count)
        }
        rest = rest.drop { $0 == " " || $0 == "\t" }
        guard let next = rest.first, next == "=" || next == "." || next == "]" else { return nil }
        return String(key)
    }

    private static func count(_ delimiter: Substring, in line: Substring) -> Int {
        line.ranges(of: delimiter).count
    }
}
