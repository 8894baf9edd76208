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
            """
    )

    @Option(name: .long, help: "Session key file made by `huddle keygen` (must be mode 0600). Not needed with --invite.")
    var key: String?

    @Option(name: .long, help: "A one-time invitation code from `huddle invite` on a member: pair with the member at the first --join address, write the session key to --key-out, then run.")
    var invite: String?

    @Option(name: .customLong("key-out"), help: "Where --invite writes the session key (mode 0600; an existing file is never overwritten). Default: --key, else ./huddle.key.")
    var keyOut: String?

    @Option(name: .long, help: "TCP+UDP address to listen on, HOST:PORT (port 0 picks a free one).")
    var listen: String = "0.0.0.0:7400"

    @Option(name: .long, help: "HOST:PORT other members use to reach this node (default: the listen address, or this host's first non-loopback IPv4 when listening on 0.0.0.0).")
    var advertise: String?

    @Option(name: .long, help: "HOST:PORT of a member to join through; repeatable. Retried in the background until it succeeds.")
    var join: [String] = []

    @Option(name: .long, help: "Human-readable name of this node (default: the host name).")
    var name: String?

    @Option(name: .long, help: "Control socket path (default: $HUDDLE_CONTROL, else $XDG_RUNTIME_DIR/huddle.sock, else /tmp/huddle-$UID.sock).")
    var control: String?

    @Option(name: .customLong("data-dir"), help: "Directory for this node's data (default: a fresh temporary directory, removed on exit).")
    var dataDir: String?

    @Option(name: .long, help: "Ed25519 identity file, created if absent, so the node keeps its public identity across runs (default: a fresh identity per run).")
    var identity: String?

    @Option(name: .customLong("max-message-bytes"), help: "Largest reliable message body; larger sends get too_large, and larger received messages are refused. Every member of a session must use the same value.")
    var maxMessageBytes: Int = 64 * 1024

    @Option(name: .customLong("max-unreliable-bytes"), help: "Largest unreliable (one datagram) message body.")
    var maxUnreliableBytes: Int = 1024

    @Option(name: .customLong("max-attachment-bytes"), help: "Largest attachment accepted by attach.add (at most 104857600, what every member accepts).")
    var maxAttachmentBytes: Int = NodeConfiguration.defaultMaxAttachmentBytes

    @Option(name: .customLong("store-limit"), help: "Most bytes of chunks this node stores.")
    var storeLimit: Int = 2 << 30

    @Option(name: .customLong("max-members"), help: "Most members this node keeps in its membership table (failed and left ones included; the oldest of those make room). New members beyond it are refused.")
    var maxMembers: Int = NodeConfiguration.defaultMaxMembers

    @Option(name: .customLong("link-stall-seconds"), help: "A link whose peer reads nothing of what waits for it this long is closed.")
    var linkStallSeconds: Double = NodeConfiguration.defaultLinkStallSeconds

    @Option(name: .customLong("ack-deadline-seconds"), help: "A member that leaves this node's broadcasts unacknowledged this long stops holding them in the store (it catches up later from its baseline), so one silent member cannot make every send busy.")
    var ackDeadlineSeconds: Double = NodeConfiguration.defaultAckDeadlineSeconds

    @Option(name: .customLong("handshake-timeout-seconds"), help: "A connection whose link handshake (or pairing) has not finished after this long is dropped; at most 16 such handshakes from one address wait at once.")
    var handshakeTimeoutSeconds: Double = NodeConfiguration.defaultHandshakeTimeoutSeconds

    @Option(name: .customLong("link-rekey-seconds"), help: "A link's send key moves on (Noise REKEY) after this many seconds, or 256 MiB, whichever comes first.")
    var linkRekeySeconds: Double = NodeConfiguration.defaultLinkRekeyInterval

    @Option(name: .customLong("rekey-every"), help: "Rotate the session key routinely this often (e.g. 1h, 1d; default: never). Members offline meanwhile are handed the new key when they come back.")
    var rekeyEvery: String?

    @Option(name: .customLong("rekey-grace"), help: "How long after a rotation a member holding the previous key (offline during it, on that epoch's roster, never removed) is still let back in and handed the current key.")
    var rekeyGrace: String = "7d"

    @Option(name: .long, help: "File of node keys (64 hex digits, one a line; # comments) that alone may remove members and rekey. Default: every member may.")
    var admins: String?

    func validate() throws {
        if let rekeyEvery {
            guard let seconds = parseDuration(rekeyEvery), seconds >= 1 else { throw ValidationError("--rekey-every: \"\(rekeyEvery)\" is not a duration of at least 1s (e.g. 90s, 10m, 2h, 1d)") }
            _ = seconds
        }
        guard let grace = parseDuration(rekeyGrace), grace >= 1 else { throw ValidationError("--rekey-grace: \"\(rekeyGrace)\" is not a duration of at least 1s (e.g. 1h, 7d)") }
        _ = grace
        if invite != nil {
            guard !join.isEmpty else { throw ValidationError("--invite needs --join HOST:PORT: the member that made the code") }
        } else {
            guard key != nil else { throw ValidationError("--key FILE is required (or pair with --invite CODE --join HOST:PORT)") }
            guard keyOut == nil else { throw ValidationError("--key-out goes with --invite") }
        }
        guard maxMessageBytes > 0, maxMessageBytes <= 1 << 20 else { throw ValidationError("--max-message-bytes must be between 1 and 1048576") }
        guard maxUnreliableBytes > 0, maxUnreliableBytes <= 60_000 else { throw ValidationError("--max-unreliable-bytes must be between 1 and 60000") }
        let attachmentLimit = NodeConfiguration.defaultMaxAttachmentBytes
        guard maxAttachmentBytes > 0, maxAttachmentBytes <= attachmentLimit else {
            throw ValidationError("--max-attachment-bytes must be between 1 and \(attachmentLimit): other members refuse larger attachments")
        }
        guard maxMembers >= 2, maxMembers <= 1 << 20 else { throw ValidationError("--max-members must be between 2 and 1048576") }
        guard linkStallSeconds >= 1, linkStallSeconds <= 86_400 else { throw ValidationError("--link-stall-seconds must be between 1 and 86400") }
        guard ackDeadlineSeconds >= 1, ackDeadlineSeconds <= 86_400 else { throw ValidationError("--ack-deadline-seconds must be between 1 and 86400") }
        guard handshakeTimeoutSeconds >= 1, handshakeTimeoutSeconds <= 3_600 else { throw ValidationError("--handshake-timeout-seconds must be between 1 and 3600") }
        guard storeLimit >= 0 else { throw ValidationError("--store-limit must not be negative") }
        guard linkRekeySeconds >= 0.01, linkRekeySeconds <= 86_400 else { throw ValidationError("--link-rekey-seconds must be between 0.01 and 86400") }
    }

    func run() async throws {
        var keyPath = key ?? "huddle.key"
        if let invite {
            keyPath = keyOut ?? keyPath
            do {
                let fingerprint = try await NodeRunner.pair(code: invite, with: join[0], keyOut: keyPath)
                FileHandle.standardError.write(Data("huddle: paired with \(join[0]); session \(fingerprint), key written to \(keyPath)\n".utf8))
            } catch {
                FileHandle.standardError.write(Data("huddle: \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
        var config = NodeConfiguration(keyPath: keyPath, controlPath: ControlPath.resolve(control))
        do {
            let (host, port) = try NodeConfiguration.parseListen(listen)
            config.listenHost = host
            config.listenPort = port
        } catch {
            throw ValidationError("--listen: \(error)")
        }
        config.advertise = advertise
        config.join = join
        config.name = name
        config.dataDir = dataDir
        config.identityPath = identity
        config.maxMessageBytes = maxMessageBytes
        config.maxUnreliableBytes = maxUnreliableBytes
        config.maxAttachmentBytes = maxAttachmentBytes
        config.storeLimitBytes = storeLimit
        config.linkRekeyInterval = linkRekeySeconds
        config.maxMembers = maxMembers
        config.linkStallSeconds = linkStallSeconds
        config.ackDeadlineSeconds = ackDeadlineSeconds
        config.handshakeTimeoutSeconds = handshakeTimeoutSeconds
        config.rekeyEvery = rekeyEvery.flatMap(parseDuration)
        config.rekeyGrace = parseDuration(rekeyGrace) ?? NodeConfiguration.defaultRekeyGrace
        if let admins {
            do { config.admins = try NodeConfiguration.loadAdmins(admins) } catch {
                FileHandle.standardError.write(Data("huddle: \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
        do {
            try await NodeRunner.run(config)
        } catch {
            FileHandle.standardError.write(Data("huddle: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}
