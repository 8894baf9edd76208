import Foundation
import TOMLKit

/// One value a settings file or a flag gives: what `huddle run` options take.
public enum SettingValue: Sendable, Equatable {
    case string(String)
    case integer(Int)
    case float(Double)
    case bool(Bool)
    case array([SettingValue])
    /// A TOML value no option takes (a date, a time, a table inside an array), as TOML writes it.
    case other(String)

    /// The value as the user wrote it, for an error line.
    public var written: String {
        switch self {
        case let .string(s): "\"\(s)\""
        case let .integer(n): String(n)
        case let .float(x): String(x)
        case let .bool(b): String(b)
        case let .array(items): "[" + items.map(\.written).joined(separator: ", ") + "]"
        case let .other(text): text
        }
    }
}

/// One `key = value` of a settings file, with the line it is on (nil when it cannot be told).
public struct SettingsFileEntry: Sendable, Equatable {
    public let key: String
    public let value: SettingValue
    public let line: Int?
}

/// The settings file `huddle run --config FILE` reads: TOML 1.0, parsed by TOMLKit (toml++).
///
/// Every `run` option is a top-level key whose value is a scalar or a list of strings. Refused,
/// each with one line naming the file and, where it can be told, the line: a file that is not
/// TOML (toml++'s own message, line and column), a table or a dotted key (`[node]`, `a.b = 1`: a
/// typo there must not turn into a key nobody reads), a file with a NUL byte or not UTF-8. What
/// each key's value must be is `RunSettings`'s to check.
public enum SettingsFile {
    /// Largest settings file read (a settings file is a few hundred bytes).
    public static let maximumBytes = 1 << 20

    /// Reads and parses the file at `path`.
    public static func load(_ path: String) throws(NodeError) -> [SettingsFileEntry] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw NodeError.setting(place: path, message: "cannot read the config file")
        }
        guard data.count <= maximumBytes else { throw NodeError.setting(place: path, message: "is larger than \(maximumBytes) bytes: not a config file") }
        return try parse(Array(data), file: path)
    }

    /// Parses the text of a settings file; `file` names it in errors. Entries in file order.
    public static func parse(_ bytes: [UInt8], file: String) throws(NodeError) -> [SettingsFileEntry] {
        // toml++ reads a C string: a NUL would end the file early, silently.
        guard !bytes.contains(0) else { throw NodeError.setting(place: file, message: "contains a NUL byte: not a text file") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw NodeError.setting(place: file, message: "is not UTF-8 text") }
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw NodeError.setting(place: "\(file):\(error.source.begin.line):\(error.source.begin.column)", message: notTOML(error.description))
        } catch {
            throw NodeError.setting(place: file, message: "not TOML: \(error)")
        }
        let lines = SettingsKeyLines(text)
        var entries: [SettingsFileEntry] = []
        for key in table.keys {
            guard let value = table[key]?.tomlValue else { continue }
            let line = lines.line(of: key)
            if value.type == .table {
                throw NodeError.setting(place: line.map { "\(file):\($0)" } ?? file,
                                   message: "\(key): tables ([name]) and dotted keys (a.b) are not used: write every key at the top level")
            }
            entries.append(SettingsFileEntry(key: key, value: SettingValue(value), line: line))
        }
        return entries.sorted { ($0.line ?? .max, $0.key) < ($1.line ?? .max, $1.key) }
    }

    /// toml++'s message ("Error while parsing string: unknown escape sequence '\q'") as the rest of
    /// one line: "not TOML: unknown escape sequence '\q' (while parsing string)".
    static func notTOML(_ description: String) -> String {
        let prefix = "Error while parsing "
        guard description.hasPrefix(prefix), let colon = description.range(of: ": ") else { return "not TOML: \(description)" }
        let what = description[description.index(description.startIndex, offsetBy: prefix.count)..<colon.lowerBound]
        let detail = description[colon.upperBound...]
        let hint = detail == "could not determine value type" ? "; strings are quoted: \"text\"" : ""
        return "not TOML: \(detail) (while parsing \(what))\(hint)"
    }
}

extension SettingValue {
    /// TOMLKit's value as a setting; what no option takes is `.other`, refused by the option.
    init(_ value: TOMLValue) {
        switch value.type {
        case .string: self = .string(value.string ?? "")
        case .int: self = .integer(value.int ?? 0)
        case .double: self = .float(value.double ?? 0)
        case .bool: self = .bool(value.bool ?? false)
        case .array: self = .array((value.array ?? TOMLArray()).map { SettingValue($0.tomlValue) })
        default: self = .other(value.debugDescription)
        }
    }
}
