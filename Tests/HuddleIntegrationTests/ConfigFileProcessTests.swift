import Foundation
import HuddleControl
import Testing

/// `huddle run --config FILE` with a real node: the file's settings take effect, flags override
/// them, and a bad key stops the node with one line naming it.
@Suite struct ConfigFileProcessTests {
    @Test func aNodeRunsWithTheSettingsOfItsConfigFile() async throws {
        let cluster = try TestCluster("config")
        defer { cluster.shutdown() }
        // The advertised address is only reported here: a lone node, which nobody dials.
        let file = "\(cluster.dir)/huddle.toml"
        try """
            # settings of the test node
            name = "from-file"          # overridden by --name
            advertise = "127.0.0.1:7399"
            max-message-bytes = 100
            max-members = 16
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let a = try await cluster.start("a", extra: ["--config", file])
        let status = try await runCLI(["status", "--json", "--control", a.control])
        #expect(status.status == 0, "\(status.stderr)")
        let reply = try JSON.parse(status.stdout).objectValue ?? [:]
        #expect(reply["name"]?.stringValue == "a", "--name overrides the file's name")
        #expect(reply["addr"]?.stringValue == "127.0.0.1:7399", "the file's advertise is the node's address")
        // max-message-bytes from the file: 101 bytes are too large.
        let sent = try await runCLI(["send", String(repeating: "x", count: 101), "--control", a.control])
        #expect(sent.status == 1 && sent.stderr.contains("too_large"), "\(sent.stderr)")
        let fits = try await runCLI(["send", String(repeating: "x", count: 100), "--control", a.control])
        #expect(fits.status == 0, "\(fits.stderr)")
    }

    @Test func aBadKeyStopsTheNodeWithOneLineNamingIt() async throws {
        let cluster = try TestCluster("badconf")
        defer { cluster.shutdown() }
        let file = "\(cluster.dir)/huddle.toml"
        try "key = \"session.key\"\nmax-members = \"many\"\n".write(toFile: file, atomically: true, encoding: .utf8)
        let bad = try await runCLI(["run", "--config", file, "--listen", "127.0.0.1:0", "--control", "\(cluster.dir)/bad.sock"])
        #expect(bad.status == 2)
        #expect(bad.stderr == "huddle: \(file):2: max-members: must be an integer, not \"many\"\n")
        try "key = \"session.key\"\nmax-membres = 8\n".write(toFile: file, atomically: true, encoding: .utf8)
        let unknown = try await runCLI(["run", "--config", file, "--listen", "127.0.0.1:0", "--control", "\(cluster.dir)/bad.sock"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.hasPrefix("huddle: \(file):2: max-membres: unknown key"))
        #expect(unknown.stderr.filter { $0 == "\n" }.count == 1)
    }
}
