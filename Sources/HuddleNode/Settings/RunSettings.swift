import Foundation
import HuddleControl
import HuddleCore

/// Where a setting came from, to name it in an error line.
public enum SettingPlace: Sendable, Equatable {
    /// `--key` on the command line.
    case flag
    /// A line of a settings file (nil: the line could not be told).
    case file(path: String, line: Int?)

    func name(_ key: String) -> String {
        switch self {
        case .flag: "--\(key)"
        case let .file(path, line?): "\(path):\(line): \(key)"
        case let .file(path, nil): "\(path): \(key)"
        }
    }
}

/// Every option of `huddle run`: its defaults, then a settings file's keys (`--config`), then the
/// flags given on the command line, each checked where it is set so a bad one is one line naming
/// its key (and file and line). A key of the file is the flag's long name without the dashes.
public struct RunSettings: Sendable, Equatable {
    public var key: String?
    public var invite: String?
    public var keyOut: String?
    public var listen = "0.0.0.0:7400"
    public var advertise: String?
    public var join: [String] = []
    public var name: String?
    public var control: String?
    public var dataDir: String?
    public var identity: String?
    public var maxMessageBytes = 64 * 1024
    public var maxUnreliableBytes = 1024
    public var maxAttachmentBytes = NodeConfiguration.defaultMaxAttachmentBytes
    public var storeLimit = 2 << 30
    public var maxMembers = NodeConfiguration.defaultMaxMembers
    public var linkStallSeconds = NodeConfiguration.defaultLinkStallSeconds
    public var ackDeadlineSeconds = NodeConfiguration.defaultAckDeadlineSeconds
    public var handshakeTimeoutSeconds = NodeConfiguration.defaultHandshakeTimeoutSeconds
    public var linkRekeySeconds = NodeConfiguration.defaultLinkRekeyInterval
    public var rekeyEvery: Double?
    public var rekeyGrace = NodeConfiguration.defaultRekeyGrace
    /// `--admins`, retired (issue 33): a node given it refuses to start with `adminsRetired`.
    public var admins: String?
    /// What a node given `--admins` (or `admins` in its config file) says before it refuses to start.
    public static let adminsRetired = "--admins is retired: a session's admins are fixed with its key (huddle keygen --admin NODE) and changed by an admin (huddle admins --add/--remove)"
    public var metrics: String?
    /// `--relay-limit`: bytes per second this node relays per member (`RelayCircuits.Budget`).
    public var relayLimit = NodeConfiguration.defaultRelayLimit
    /// `--no-relay`: this node relays nothing.
    public var noRelay = false

    public init() {}

    /// Every key a settings file may hold (the flags of `huddle run` but `--config`).
    public static let keys = [
        "key", "invite", "key-out", "listen", "advertise", "join", "name", "control", "data-dir", "identity",
        "max-message-bytes", "max-unreliable-bytes", "max-attachment-bytes", "store-limit", "max-members",
        "link-stall-seconds", "ack-deadline-seconds", "handshake-timeout-seconds", "link-rekey-seconds",
        "rekey-every", "rekey-grace", "admins", "metrics", "relay-limit", "no-relay",
    ]

    /// Keys naming files or directories: relative ones in a settings file are taken from the file's directory.
    static let pathKeys: Set<String> = ["key", "key-out", "control", "data-dir", "identity", "admins"]

    /// Defaults, then `file`'s entries (read from `filePath`), then `flags`; then the rules that
    /// tie options together.
    public static func resolve(file entries: [SettingsFileEntry] = [], filePath: String = "", flags: [(String, SettingValue)]) throws(NodeError) -> RunSettings {
        var settings = RunSettings()
        let directory = (filePath as NSString).deletingLastPathComponent
        for entry in entries {
            var value = entry.value
            if pathKeys.contains(entry.key), case let .string(path) = value, !path.hasPrefix("/"), !directory.isEmpty {
                value = .string((directory as NSString).appendingPathComponent(path))
            }
            try settings.set(entry.key, value, from: .file(path: filePath, line: entry.line))
        }
        for (key, value) in flags { try settings.set(key, value, from: .flag) }
        try settings.checkTogether()
        return settings
    }

    /// Sets one option, checking its type and range.
    public mutating func set(_ key: String, _ value: SettingValue, from place: SettingPlace) throws(NodeError) {
        let setting = Setting(key: key, value: value, place: place)
        switch key {
        case "key": self.key = try setting.string()
        case "invite": invite = try setting.string()
        case "key-out": keyOut = try setting.string()
        case "listen":
            let text = try setting.string()
            do { _ = try NodeConfiguration.parseListen(text) } catch { throw setting.error("\(error)") }
            listen = text
        case "advertise": advertise = try setting.string()
        case "join": join = try setting.strings()
        case "name": name = try setting.string()
        case "control": control = try setting.string()
        case "data-dir": dataDir = try setting.string()
        case "identity": identity = try setting.string()
        case "max-message-bytes": maxMessageBytes = try setting.integer(1...(1 << 20))
        case "max-unreliable-bytes": maxUnreliableBytes = try setting.integer(1...SessionCore.Limits.unreliableCeiling)
        case "max-attachment-bytes":
            maxAttachmentBytes = try setting.integer(1...NodeConfiguration.defaultMaxAttachmentBytes, why: ": other members refuse larger attachments")
        case "store-limit": storeLimit = try setting.integer(0...Int.max)
        case "max-members": maxMembers = try setting.integer(2...(1 << 20))
        case "link-stall-seconds": linkStallSeconds = try setting.seconds(1...86_400)
        case "ack-deadline-seconds": ackDeadlineSeconds = try setting.seconds(1...86_400)
        case "handshake-timeout-seconds": handshakeTimeoutSeconds = try setting.seconds(1...3_600)
        case "link-rekey-seconds": linkRekeySeconds = try setting.seconds(0.01...86_400)
        case "rekey-every": rekeyEvery = try setting.duration(example: "90s, 10m, 2h, 1d")
        case "rekey-grace": rekeyGrace = try setting.duration(example: "1h, 7d")
        case "admins": admins = try setting.string()
        case "relay-limit": relayLimit = try setting.integer(1024...(1 << 40))
        case "no-relay": noRelay = try setting.bool()
        case "metrics":
            let text = try setting.string()
            do { _ = try NodeConfiguration.parseListen(text) } catch { throw setting.error("\(error)") }
            metrics = text
        default:
            throw NodeError.setting(place: place.name(key), message: "unknown key (the keys are the long options of `huddle run --help`: \(Self.keys.joined(separator: ", ")))")
        }
    }

    /// The rules between options: a key file, or an invitation and whom to pair with.
    func checkTogether() throws(NodeError) {
        if invite != nil {
            guard !join.isEmpty else { throw NodeError.setting(place: "--invite", message: "needs --join HOST:PORT (or join in the config file): the member that made the code") }
        } else {
            guard key != nil else { throw NodeError.setting(place: "--key", message: "a session key file is required (--key FILE or key in the config file; or pair with --invite CODE --join HOST:PORT)") }
            guard keyOut == nil else { throw NodeError.setting(place: "--key-out", message: "goes with --invite") }
        }
    }

    /// The key file the node runs with (with `--invite`, where pairing writes it).
    public var keyPath: String { invite != nil ? (keyOut ?? key ?? "huddle.key") : (key ?? "huddle.key") }

    /// What the node is told (`--admins` is read by the caller: it names a file to load).
    public func nodeConfiguration() -> NodeConfiguration {
        var config = NodeConfiguration(keyPath: keyPath, controlPath: ControlPath.resolve(control))
        // `listen` was checked when it was set.
        if let (host, port) = try? NodeConfiguration.parseListen(listen) {
            config.listenHost = host
            config.listenPort = port
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
        config.rekeyEvery = rekeyEvery
        config.rekeyGrace = rekeyGrace
        config.metrics = metrics
        config.relayBudget = noRelay ? .none : RelayCircuits.Budget(bytesPerSecond: relayLimit)
        return config
    }
}

/// One key's value on its way into `RunSettings`: the typed reads, each failing with one line.
private struct Setting {
    let key: String
    let value: SettingValue
    let place: SettingPlace

    func error(_ message: String) -> NodeError { NodeError.setting(place: place.name(key), message: message) }

    func string() throws(NodeError) -> String {
        guard case let .string(s) = value else { throw error("must be a string (in quotes), not \(value.written)") }
        guard !s.isEmpty else { throw error("must not be empty") }
        return s
    }

    func bool() throws(NodeError) -> Bool {
        guard case let .bool(b) = value else { throw error("must be true or false, not \(value.written)") }
        return b
    }

    func strings() throws(NodeError) -> [String] {
        guard case let .array(items) = value else { throw error("must be an array of strings, e.g. [\"10.0.0.1:7400\"], not \(value.written)") }
        return try items.map { item throws(NodeError) in
            guard case let .string(s) = item, !s.isEmpty else { throw error("must be an array of strings, not \(value.written)") }
            return s
        }
    }

    func integer(_ range: ClosedRange<Int>, why: String = "") throws(NodeError) -> Int {
        guard case let .integer(n) = value else { throw error("must be an integer, not \(value.written)") }
        guard range.contains(n) else { throw error(Self.between(range, got: value) + why) }
        return n
    }

    func seconds(_ range: ClosedRange<Double>) throws(NodeError) -> Double {
        let x: Double
        switch value {
        case let .integer(n): x = Double(n)
        case let .float(f): x = f
        default: throw error("must be a number of seconds, not \(value.written)")
        }
        guard range.contains(x) else { throw error(Self.between(range, got: value)) }
        return x
    }

    /// A duration of at least 1 s: a string such as `"10m"`, or an integer of seconds.
    func duration(example: String) throws(NodeError) -> Double {
        let seconds: Double?
        switch value {
        case let .string(s): seconds = parseDuration(s)
        case let .integer(n): seconds = Double(n)
        default: seconds = nil
        }
        guard let seconds, seconds >= 1 else { throw error("\(value.written) is not a duration of at least 1s (e.g. \(example))") }
        return seconds
    }

    static func between<T: Comparable>(_ range: ClosedRange<T>, got value: SettingValue) -> String {
        let upper = "\(range.upperBound)" == "\(Int.max)" ? "" : " and \(range.upperBound)"
        return upper.isEmpty ? "must be at least \(range.lowerBound), not \(value.written)" : "must be between \(range.lowerBound)\(upper), not \(value.written)"
    }
}
