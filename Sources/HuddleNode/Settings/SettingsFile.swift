import Foundation

/// One value a settings file or a flag gives: what `huddle run` options take.
public enum SettingValue: Sendable, Equatable {
    case string(String)
    case integer(Int)
    case float(Double)
    case bool(Bool)
    case array([SettingValue])

    /// The value as the user wrote it, for an error line.
    public var written: String {
        switch self {
        case let .string(s): "\"\(s)\""
        case let .integer(n): String(n)
        case let .float(x): String(x)
        case let .bool(b): String(b)
        case let .array(items): "[" + items.map(\.written).joined(separator: ", ") + "]"
        }
    }
}

/// One `key = value` of a settings file, with the line it is on.
public struct SettingsFileEntry: Sendable, Equatable {
    public let key: String
    public let value: SettingValue
    public let line: Int
}

/// The settings file `huddle run --config FILE` reads: a strict subset of TOML 1.0.
///
/// Taken: `key = value` lines with bare keys (`A-Z a-z 0-9 - _`), `#` comments, blank lines;
/// values that are basic strings (`"…"`, escapes `\" \\ \n \t \r \uXXXX`), literal strings
/// (`'…'`), integers (decimal, `_` between digits), floats (`1.5`, `2e3`), `true`/`false`, and
/// arrays of those (may span lines, trailing comma allowed). Refused, each with one line naming
/// the file and line: tables, dotted or quoted keys, a key given twice, anything else. A strict
/// subset rather than a TOML library: every `run` option is a scalar or a list of strings, and
/// refusing what is not used keeps a typo from being taken for a table or a key of another name.
public enum SettingsFile {
    /// Largest settings file read (a settings file is a few hundred bytes).
    public static let maximumBytes = 1 << 20

    /// Reads and parses the file at `path`.
    public static func load(_ path: String) throws(SettingError) -> [SettingsFileEntry] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SettingError(place: path, message: "cannot read the config file")
        }
        guard data.count <= maximumBytes else { throw SettingError(place: path, message: "is larger than \(maximumBytes) bytes: not a config file") }
        return try parse(Array(data), file: path)
    }

    /// Parses the text of a settings file; `file` names it in errors.
    public static func parse(_ bytes: [UInt8], file: String) throws(SettingError) -> [SettingsFileEntry] {
        var scanner = SettingsScanner(bytes: bytes, file: file)
        var entries: [SettingsFileEntry] = []
        var seen: Set<String> = []
        while true {
            scanner.skipBlankLinesAndComments()
            guard !scanner.atEnd else { return entries }
            let line = scanner.line
            if scanner.peek == UInt8(ascii: "[") {
                throw scanner.error("tables ([name]) are not used: write every key at the top level")
            }
            let key = try scanner.bareKey()
            scanner.skipSpaces()
            guard scanner.take(UInt8(ascii: "=")) else {
                throw scanner.error("\(key): expected `=` after the key (dotted or quoted keys are not used)")
            }
            scanner.skipSpaces()
            let value = try scanner.value(for: key)
            try scanner.endOfLine(after: key)
            guard seen.insert(key).inserted else { throw SettingError(place: "\(file):\(line)", message: "\(key): given twice") }
            entries.append(SettingsFileEntry(key: key, value: value, line: line))
        }
    }
}
