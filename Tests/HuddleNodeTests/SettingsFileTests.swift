@testable import HuddleNode
import Testing

/// The settings file's TOML subset (`SettingsFile`): what it takes, and one line for what it refuses.
@Suite struct SettingsFileTests {
    func parse(_ text: String) throws(SettingError) -> [SettingsFileEntry] { try SettingsFile.parse(Array(text.utf8), file: "h.toml") }

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

    @Test(arguments: [
        ("[node]\nkey = \"x\"", "h.toml:1: tables ([name]) are not used: write every key at the top level"),
        ("a.b = 1", "h.toml:1: a: expected `=` after the key (dotted or quoted keys are not used)"),
        ("\"key\" = 1", "h.toml:1: expected `key = value`"),
        ("name = x", "h.toml:1: name: x is not a value (strings are quoted: \"x\")"),
        ("name =", "h.toml:1: name: the value is missing"),
        ("name = \"x", "h.toml:1: name: the string is not closed"),
        ("name = \"x\ny\"", "h.toml:1: name: the string is not closed on its line"),
        ("name = \"x\" y", "h.toml:1: name: unexpected text after the value"),
        ("\nname = 1\nname = 2", "h.toml:3: name: given twice"),
        ("join = [[\"a\"]]", "h.toml:1: join: nested arrays are not used"),
        ("join = [\"a\" \"b\"]", "h.toml:1: join: expected `,` or `]` in the array"),
        ("n = 1__0", "h.toml:1: n: 1__0 is not a value (strings are quoted: \"1__0\")"),
        ("n = 1e999", "h.toml:1: n: 1e999 is not a value (strings are quoted: \"1e999\")"),
        ("n = \"\\q\"", "h.toml:1: n: unknown escape \\q"),
    ])
    func refusesWithOneLineNamingTheLine(text: String, expected: String) {
        #expect(throws: SettingError.self) { try parse(text) }
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
