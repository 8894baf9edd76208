@testable import HuddleNode
import Testing

/// The settings file (`SettingsFile`, TOML through TOMLKit): what it takes, with the line of each
/// key, and one line for what it refuses.
@Suite struct SettingsFileTests {
    func parse(_ text: String) throws(NodeError) -> [SettingsFileEntry] { try SettingsFile.parse(Array(text.utf8), file: "h.toml") }

    @Test func takesEveryValueKindWithCommentsAndLines() throws {
        let entries = try parse("""
            # a comment
            key = "a \\"b\\" \\u00e9"   # trailing comment
            name = 'lit\\eral'

            max-members = 1_000
            link-stall-seconds = 2.5
            big = 2e3
            on = true
            join = [
              "127.0.0.1:1",  # first
              '127.0.0.1:2',
            ]
            empty = []
            """)
        #expect(entries.map(\.key) == ["key", "name", "max-members", "link-stall-seconds", "big", "on", "join", "empty"])
        #expect(entries[0].value == .string("a \"b\" é"))
        #expect(entries[1].value == .string("lit\\eral"))
        #expect(entries[2].value == .integer(1000))
        #expect(entries[2].line == 5)
        #expect(entries[3].value == .float(2.5))
        #expect(entries[4].value == .float(2000))
        #expect(entries[5].value == .bool(true))
        #expect(entries[6].value == .array([.string("127.0.0.1:1"), .string("127.0.0.1:2")]))
        #expect(entries[7].value == .array([]))
    }

    /// TOML that the subset parser refused and toml++ takes: quoted keys, multi-line strings, nested
    /// arrays and dates; the lines are still told, and a value no option takes reaches the option.
    @Test func takesTOMLBeyondTheOldSubset() throws {
        let entries = try parse("""
            "key" = "k"
            meta = \"\"\"
            name = not a key
            \"\"\"
            name = 1979-05-27
            join = [["a"]]
            """)
        #expect(entries.map(\.key) == ["key", "meta", "name", "join"])
        #expect(entries.map(\.line) == [1, 2, 5, 6])
        #expect(entries[2].value == .other("1979-05-27"))
        #expect(entries[3].value == .array([.array([.string("a")])]))
    }

    @Test(arguments: [
        ("[node]\nkey = \"x\"", "h.toml:1: node: tables ([name]) and dotted keys (a.b) are not used: write every key at the top level"),
        ("name = \"n\"\na.b = 1", "h.toml:2: a: tables ([name]) and dotted keys (a.b) are not used: write every key at the top level"),
        ("name = x", "h.toml:1:8: not TOML: could not determine value type (while parsing value); strings are quoted: \"text\""),
        ("name =", "h.toml:1:7: not TOML: encountered end-of-file (while parsing key-value pair)"),
        ("name = \"x", "h.toml:1:10: not TOML: encountered end-of-file (while parsing string)"),
        ("name = \"x\ny\"", "h.toml:1:10: not TOML: unescaped control characters other than TAB (U+0009) are explicitly prohibited (while parsing string)"),
        ("name = \"x\" y", "h.toml:1:12: not TOML: expected a comment or whitespace, saw 'y' (while parsing key-value pair)"),
        ("\nname = 1\nname = 2", "h.toml:3:8: not TOML: cannot redefine existing integer 'name' (while parsing key-value pair)"),
        ("join = [\"a\" \"b\"]", "h.toml:1:13: not TOML: expected comma or closing ']', saw '\"' (while parsing array)"),
        ("n = 1__0", "h.toml:1:7: not TOML: underscores may only follow digits (while parsing decimal integer)"),
        ("n = 1e999", "h.toml:1:10: not TOML: '1e999' could not be interpreted as a value (while parsing floating-point)"),
        ("n = \"\\q\"", "h.toml:1:7: not TOML: unknown escape sequence '\\q' (while parsing string)"),
        ("name = \"a\"\u{0}\nmax-members = 1", "h.toml: contains a NUL byte: not a text file"),
    ])
    func refusesWithOneLineNamingTheLine(text: String, expected: String) {
        #expect(throws: NodeError.self) { try parse(text) }
        do {
            _ = try parse(text)
        } catch {
            #expect(error.description == expected)
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func aMissingFileIsOneLine() {
        do {
            _ = try SettingsFile.load("/nonexistent/huddle.toml")
            Issue.record("a missing file was read")
        } catch {
            #expect(error.description == "/nonexistent/huddle.toml: cannot read the config file")
        }
    }
}
