import Foundation
@testable import HuddleNode
import Testing

/// `huddle run --config`: every key of a settings file reaches the node's configuration, flags
/// override it, and a bad key or value is one line naming the key, the file and the line.
@Suite struct RunSettingsTests {
    /// A file setting every key (but `invite` and `key-out`, which go together: below).
    static let everyKey = """
        key = "session.key"
        listen = "127.0.0.1:7555"
        advertise = "127.0.0.1:7556"
        join = ["127.0.0.1:7400", "127.0.0.1:7401"]
        name = "from-file"
        control = "/run/h.sock"
        data-dir = "data"
        identity = "/etc/huddle/id"
        max-message-bytes = 1000
        max-unreliable-bytes = 500
        max-attachment-bytes = 4096
        store-limit = 1_000_000
        max-members = 64
        link-stall-seconds = 30
        ack-deadline-seconds = 12.5
        handshake-timeout-seconds = 5
        link-rekey-seconds = 0.5
        rekey-every = "1h"
        rekey-grace = 3600
        admins = "admins.txt"
        relay-limit = 65536
        no-relay = true
        metrics = "127.0.0.1:9464"
        """

    func resolve(_ text: String, flags: [(String, SettingValue)] = []) throws(NodeError) -> RunSettings {
        try RunSettings.resolve(file: try SettingsFile.parse(Array(text.utf8), file: "/etc/huddle/h.toml"), filePath: "/etc/huddle/h.toml", flags: flags)
    }

    /// The one line a bad file or flag gives.
    func refusal(_ text: String, flags: [(String, SettingValue)] = []) -> String {
        do {
            _ = try resolve(text, flags: flags)
            return "(accepted)"
        } catch {
            #expect(!error.description.contains("\n"))
            return error.description
        }
    }

    @Test func everyKeyReachesTheConfiguration() throws {
        let settings = try resolve(Self.everyKey)
        let config = settings.nodeConfiguration()
        #expect(config.keyPath == "/etc/huddle/session.key", "a relative path is taken from the file's directory")
        #expect(config.listenHost == "127.0.0.1" && config.listenPort == 7555)
        #expect(config.advertise == "127.0.0.1:7556")
        #expect(config.join == ["127.0.0.1:7400", "127.0.0.1:7401"])
        #expect(config.name == "from-file")
        #expect(config.controlPath == "/run/h.sock")
        #expect(config.dataDir == "/etc/huddle/data")
        #expect(config.identityPath == "/etc/huddle/id")
        #expect(config.maxMessageBytes == 1000)
        #expect(config.maxUnreliableBytes == 500)
        #expect(config.maxAttachmentBytes == 4096)
        #expect(config.storeLimitBytes == 1_000_000)
        #expect(config.maxMembers == 64)
        #expect(config.linkStallSeconds == 30)
        #expect(config.ackDeadlineSeconds == 12.5)
        #expect(config.handshakeTimeoutSeconds == 5)
        #expect(config.linkRekeyInterval == 0.5)
        #expect(config.rekeyEvery == 3600)
        #expect(config.rekeyGrace == 3600)
        #expect(settings.admins == "/etc/huddle/admins.txt")
        #expect(config.metrics == "127.0.0.1:9464")
        #expect(settings.relayLimit == 65536 && settings.noRelay && config.relayBudget.circuits == 0 && config.relayBudget.circuitsPerMember == 0, "--no-relay wins over --relay-limit")
        // Every key a file may hold is set by the file above, or by the invitation one below.
        let keys = Set(try SettingsFile.parse(Array(Self.everyKey.utf8), file: "f").map(\.key)).union(["invite", "key-out"])
        #expect(keys == Set(RunSettings.keys))
    }

    @Test func anInvitationFromTheFile() throws {
        let settings = try resolve("invite = \"7-a-b-c\"\njoin = [\"127.0.0.1:7400\"]\nkey-out = \"/k/huddle.key\"")
        #expect(settings.invite == "7-a-b-c")
        #expect(settings.keyPath == "/k/huddle.key")
    }

    @Test func flagsOverrideTheFile() throws {
        let settings = try resolve(Self.everyKey, flags: [
            ("name", .string("from-flag")), ("max-members", .integer(8)), ("join", .array([.string("10.0.0.9:1")])),
            ("link-stall-seconds", .float(2)), ("key", .string("other.key")),
        ])
        #expect(settings.name == "from-flag")
        #expect(settings.maxMembers == 8)
        #expect(settings.join == ["10.0.0.9:1"], "a --join replaces the file's list")
        #expect(settings.linkStallSeconds == 2)
        #expect(settings.key == "other.key", "a flag's relative path stays relative to the working directory")
        #expect(settings.maxMessageBytes == 1000, "what no flag names stays the file's")
    }

    @Test func defaultsWithoutAFile() throws {
        let settings = try RunSettings.resolve(flags: [("key", .string("k"))])
        #expect(settings == { var s = RunSettings(); s.key = "k"; return s }())
        #expect(settings.listen == "0.0.0.0:7400")
    }

    @Test func anUnknownKeyIsOneLineNamingIt() {
        let line = refusal("key = \"k\"\nmax-member = 3")
        #expect(line.hasPrefix("/etc/huddle/h.toml:2: max-member: unknown key (the keys are the long options of `huddle run --help`: key, invite,"))
    }

    @Test(arguments: [
        ("max-members = \"64\"", "/etc/huddle/h.toml:2: max-members: must be an integer, not \"64\""),
        ("max-members = 6.5", "/etc/huddle/h.toml:2: max-members: must be an integer, not 6.5"),
        ("name = 3", "/etc/huddle/h.toml:2: name: must be a string (in quotes), not 3"),
        ("name = \"\"", "/etc/huddle/h.toml:2: name: must not be empty"),
        ("join = \"127.0.0.1:1\"", "/etc/huddle/h.toml:2: join: must be an array of strings, e.g. [\"10.0.0.1:7400\"], not \"127.0.0.1:1\""),
        ("join = [1]", "/etc/huddle/h.toml:2: join: must be an array of strings, not [1]"),
        ("join = [[\"a\"]]", "/etc/huddle/h.toml:2: join: must be an array of strings, not [[\"a\"]]"),
        ("name = 1979-05-27", "/etc/huddle/h.toml:2: name: must be a string (in quotes), not 1979-05-27"),
        ("link-stall-seconds = true", "/etc/huddle/h.toml:2: link-stall-seconds: must be a number of seconds, not true"),
        ("rekey-every = \"soon\"", "/etc/huddle/h.toml:2: rekey-every: \"soon\" is not a duration of at least 1s (e.g. 90s, 10m, 2h, 1d)"),
        ("rekey-grace = false", "/etc/huddle/h.toml:2: rekey-grace: false is not a duration of at least 1s (e.g. 1h, 7d)"),
    ])
    func aValueOfTheWrongTypeIsOneLineNamingTheKey(text: String, expected: String) {
        #expect(refusal("key = \"k\"\n" + text) == expected)
    }

    @Test(arguments: [
        ("max-message-bytes = 0", "/etc/huddle/h.toml:2: max-message-bytes: must be between 1 and 1048576, not 0"),
        ("max-unreliable-bytes = 60001", "/etc/huddle/h.toml:2: max-unreliable-bytes: must be between 1 and 60000, not 60001"),
        ("max-attachment-bytes = 104857601", "/etc/huddle/h.toml:2: max-attachment-bytes: must be between 1 and 104857600, not 104857601: other members refuse larger attachments"),
        ("store-limit = -1", "/etc/huddle/h.toml:2: store-limit: must be at least 0, not -1"),
        ("max-members = 1", "/etc/huddle/h.toml:2: max-members: must be between 2 and 1048576, not 1"),
        ("link-stall-seconds = 0.5", "/etc/huddle/h.toml:2: link-stall-seconds: must be between 1.0 and 86400.0, not 0.5"),
        ("ack-deadline-seconds = 86401", "/etc/huddle/h.toml:2: ack-deadline-seconds: must be between 1.0 and 86400.0, not 86401"),
        ("handshake-timeout-seconds = 3601", "/etc/huddle/h.toml:2: handshake-timeout-seconds: must be between 1.0 and 3600.0, not 3601"),
        ("link-rekey-seconds = 0", "/etc/huddle/h.toml:2: link-rekey-seconds: must be between 0.01 and 86400.0, not 0"),
        ("rekey-every = \"0s\"", "/etc/huddle/h.toml:2: rekey-every: \"0s\" is not a duration of at least 1s (e.g. 90s, 10m, 2h, 1d)"),
        ("listen = \"127.0.0.1:99999\"", "/etc/huddle/h.toml:2: listen: address 127.0.0.1:99999 "),
        ("metrics = \"127.0.0.1:99999\"", "/etc/huddle/h.toml:2: metrics: address 127.0.0.1:99999 "),
    ])
    func aValueOutOfRangeIsOneLineNamingTheKey(text: String, expected: String) {
        #expect(refusal("key = \"k\"\n" + text).hasPrefix(expected))
    }

    @Test func aBadFlagIsNamedAsTheFlag() {
        #expect(refusal("key = \"k\"", flags: [("max-members", .integer(1))]) == "--max-members: must be between 2 and 1048576, not 1")
        #expect(refusal("max-members = 8") == "--key: a session key file is required (--key FILE or key in the config file; or pair with --invite CODE --join HOST:PORT)")
        #expect(refusal("invite = \"7-a-b\"") == "--invite: needs --join HOST:PORT (or join in the config file): the member that made the code")
        #expect(refusal("key = \"k\"\nkey-out = \"o\"") == "--key-out: goes with --invite")
    }

    @Test func theExampleFileSetsEveryKeyButTheInvitationOnes() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("examples/huddle.toml").path
        let entries = try SettingsFile.load(path)
        let settings = try RunSettings.resolve(file: entries, filePath: path, flags: [])
        #expect(settings.join == ["10.0.0.1:7400", "10.0.0.2:7400"])
        #expect(settings.rekeyEvery == 86_400)
        #expect(Set(entries.map(\.key)).isSuperset(of: Set(RunSettings.keys).subtracting(["invite", "key-out", "advertise", "admins"])))
    }
}
