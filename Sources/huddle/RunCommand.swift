import ArgumentParser
import Foundation
import HuddleControl
import HuddleNode

/// `huddle run`: one node in the foreground until SIGINT, SIGTERM or `leave`.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a node of the session named by a key file, in the foreground.",
        discussion: """
            The node listens on TCP and UDP (default port 7400), links to every other member, and is \
            driven through its control socket. SIGINT and SIGTERM make it leave gracefully.
            Example: huddle run --key session.key --listen 127.0.0.1:7401 --join 127.0.0.1:7400
            A new host without the key file pairs with a one-time code from `huddle invite` on a member:
              huddle run --invite 7-crossover-clockwork-ribbon --join HOST:PORT --key-out huddle.key
            Every option may be given in a settings file instead: huddle run --config /etc/huddle.toml, \
            where each key is the option's long name (key = "/etc/huddle/session.key", listen = "0.0.0.0:7400", \
            join = ["10.0.0.1:7400"], max-members = 64, link-stall-seconds = 30, rekey-every = "1d"); \
            relative paths in it are taken from the file's directory. Options on the command line override \
            the file. An unknown key or a bad value stops the node with one line naming it (exit status 2).
            Prometheus metrics, off by default: --metrics 127.0.0.1:9464 serves http://127.0.0.1:9464/metrics \
            (loopback: the listener has no authentication).
            """
    )

    @Option(name: .long, help: "A settings file (TOML): each key is one of these options' long name (e.g. max-members = 64, join = [\"10.0.0.1:7400\"]); options given here override it. See examples/huddle.toml.")
    var config: String?

    @Option(name: .long, help: "Session key file made by `huddle keygen` (must be mode 0600). Not needed with --invite.")
    var key: String?

    @Option(name: .long, help: "A one-time invitation code from `huddle invite` on a member: pair with the member at the first --join address, write the session key to --key-out, then run.")
    var invite: String?

    @Option(name: .customLong("key-out"), help: "Where --invite writes the session key (mode 0600; an existing file is never overwritten). Default: --key, else ./huddle.key.")
    var keyOut: String?

    @Option(name: .long, help: "TCP+UDP address to listen on, HOST:PORT (port 0 picks a free one). Default: 0.0.0.0:7400.")
    var listen: String?

    @Option(name: .long, help: "HOST:PORT other members use to reach this node (default: the listen address, or this host's first non-loopback IPv4 when listening on 0.0.0.0).")
    var advertise: String?

    @Option(name: .long, help: "HOST:PORT of a member to join through; repeatable (replaces the config file's list). Retried in the background until it succeeds.")
    var join: [String] = []

    @Option(name: .long, help: "Human-readable name of this node (default: the host name).")
    var name: String?

    @Option(name: .long, help: "Control socket path (default: $HUDDLE_CONTROL, else $XDG_RUNTIME_DIR/huddle.sock, else /tmp/huddle-$UID.sock).")
    var control: String?

    @Option(name: .customLong("data-dir"), help: "Directory for this node's data (default: a fresh temporary directory, removed on exit).")
    var dataDir: String?

    @Option(name: .long, help: "Ed25519 identity file, created if absent, so the node keeps its public identity across runs (default: a fresh identity per run).")
    var identity: String?

    @Option(name: .customLong("max-message-bytes"), help: "Largest reliable message body (1 to 1048576, default 65536); larger sends get too_large, and larger received messages are refused. Every member of a session must use the same value.")
    var maxMessageBytes: Int?

    @Option(name: .customLong("max-unreliable-bytes"), help: "Largest unreliable (one datagram) message body (1 to 60000, default 1024).")
    var maxUnreliableBytes: Int?

    @Option(name: .customLong("max-attachment-bytes"), help: "Largest attachment accepted by attach.add (at most and by default 104857600, what every member accepts).")
    var maxAttachmentBytes: Int?

    @Option(name: .customLong("store-limit"), help: "Most bytes of chunks this node stores (default 2147483648).")
    var storeLimit: Int?

    @Option(name: .customLong("max-members"), help: "Most members this node keeps in its membership table (2 to 1048576, default \(NodeConfiguration.defaultMaxMembers); failed and left ones included; the oldest of those make room). New members beyond it are refused.")
    var maxMembers: Int?

    @Option(name: .customLong("link-stall-seconds"), help: "A link whose peer reads nothing of what waits for it this long is closed (1 to 86400, default \(Int(NodeConfiguration.defaultLinkStallSeconds))).")
    var linkStallSeconds: Double?

    @Option(name: .customLong("ack-deadline-seconds"), help: "A member that leaves this node's broadcasts unacknowledged this long stops holding them in the store (it catches up later from its baseline), so one silent member cannot make every send busy (1 to 86400, default \(Int(NodeConfiguration.defaultAckDeadlineSeconds))).")
    var ackDeadlineSeconds: Double?

    @Option(name: .customLong("handshake-timeout-seconds"), help: "A connection whose link handshake (or pairing) has not finished after this long is dropped; at most 16 such handshakes from one address wait at once (1 to 3600, default \(Int(NodeConfiguration.defaultHandshakeTimeoutSeconds))).")
    var handshakeTimeoutSeconds: Double?

    @Option(name: .customLong("link-rekey-seconds"), help: "A link's send key moves on (Noise REKEY) after this many seconds, or 256 MiB, whichever comes first (0.01 to 86400, default \(Int(NodeConfiguration.defaultLinkRekeyInterval))).")
    var linkRekeySeconds: Double?

    @Option(name: .customLong("rekey-every"), help: "Rotate the session key routinely this often (e.g. 1h, 1d; default: never). Members offline meanwhile are handed the new key when they come back.")
    var rekeyEvery: String?

    @Option(name: .customLong("rekey-grace"), help: "How long after a rotation a member holding the previous key (offline during it, on that epoch's roster, never removed) is still let back in and handed the current key (default 7d).")
    var rekeyGrace: String?

    @Option(name: .long, help: "Retired: admins are fixed with the session key (huddle keygen --admin NODE) and changed by an admin (huddle admins).")
    var admins: String?

    @Option(name: .long, help: "Serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9464; port 0 picks a free one, logged at start). Off by default. Plain HTTP without authentication: keep it on loopback or a trusted network.")
    var metrics: String?

    @Option(name: .customLong("relay-limit"), help: "Bytes per second this node relays for each member whose circuit it carries (members that cannot link to each other directly link through a member both reach; 1024 to 2^40, default \(NodeConfiguration.defaultRelayLimit)); a circuit over it is closed.")
    var relayLimit: Int?

    @Flag(name: .customLong("no-relay"), help: "Relay nothing for other members (circuit requests are refused and counted in stats.relay).")
    var noRelay = false

    /// The options given on the command line, as settings (those not given are absent, so a
    /// settings file's values stand).
    var flags: [(String, SettingValue)] {
        var flags: [(String, SettingValue)] = []
        let strings: [(String, String?)] = [
            ("key", key), ("invite", invite), ("key-out", keyOut), ("listen", listen), ("advertise", advertise), ("name", name),
            ("control", control), ("data-dir", dataDir), ("identity", identity), ("rekey-every", rekeyEvery),
            ("rekey-grace", rekeyGrace), ("admins", admins), ("metrics", metrics),
        ]
        for case let (flag, value?) in strings { flags.append((flag, .string(value))) }
        if !join.isEmpty { flags.append(("join", .array(join.map { .string($0) }))) }
        let integers: [(String, Int?)] = [
            ("max-message-bytes", maxMessageBytes), ("max-unreliable-bytes", maxUnreliableBytes),
            ("max-attachment-bytes", maxAttachmentBytes), ("store-limit", storeLimit), ("max-members", maxMembers),
            ("relay-limit", relayLimit),
        ]
        for case let (flag, value?) in integers { flags.append((flag, .integer(value))) }
        let seconds: [(String, Double?)] = [
            ("link-stall-seconds", linkStallSeconds), ("ack-deadline-seconds", ackDeadlineSeconds),
            ("handshake-timeout-seconds", handshakeTimeoutSeconds), ("link-rekey-seconds", linkRekeySeconds),
        ]
        for case let (flag, value?) in seconds { flags.append((flag, .float(value))) }
        if noRelay { flags.append(("no-relay", .bool(true))) }
        return flags
    }

    /// The settings file's keys under the flags given; a bad one is one line naming it.
    func settings() throws(NodeError) -> RunSettings {
        guard let config else { return try RunSettings.resolve(flags: flags) }
        return try RunSettings.resolve(file: try SettingsFile.load(config), filePath: config, flags: flags)
    }

    func run() async throws {
        let settings: RunSettings
        do { settings = try self.settings() } catch {
            complain(error.description)
            throw ExitCode(2)
        }
        // Issue 33: admins are the session's signed state, fixed with its key, not a per-node file.
        if settings.admins != nil {
            complain(RunSettings.adminsRetired)
            throw ExitCode(2)
        }
        let keyPath = settings.keyPath
        if let invite = settings.invite {
            do {
                let fingerprint = try await NodeRunner.pair(code: invite, with: settings.join[0], keyOut: keyPath)
                FileHandle.standardError.write(Data("huddle: paired with \(settings.join[0]); session \(fingerprint), key written to \(keyPath)\n".utf8))
            } catch {
                complain("\(error)")
                throw ExitCode(1)
            }
        }
        let config = settings.nodeConfiguration()
        do {
            try await NodeRunner.run(config)
        } catch {
            complain("\(error)")
            throw ExitCode(1)
        }
    }
}
