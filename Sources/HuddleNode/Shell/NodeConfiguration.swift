import Foundation
import HuddleCrypto
import HuddleCore

/// Everything `huddle run` was told: where to listen, whom to join, where the key and control socket are.
public struct NodeConfiguration: Sendable {
    public var keyPath: String
    public var listenHost: String = "0.0.0.0"
    public var listenPort: Int = 7400
    /// `host:port` other members use to reach this node; derived from the listen address when nil.
    public var advertise: String?
    public var join: [String] = []
    public var name: String?
    public var controlPath: String
    public var dataDir: String?
    public var identityPath: String?
    /// Largest reliable message body (`too_large` above it).
    public var maxMessageBytes: Int = 64 * 1024
    /// Largest unreliable message body, so it fits one datagram.
    public var maxUnreliableBytes: Int = 1024
    /// Largest attachment `attach.add` accepts; never above what a manifest may describe.
    public var maxAttachmentBytes: Int = Self.defaultMaxAttachmentBytes
    public static let defaultMaxAttachmentBytes = Manifest.maximumSize
    public var storeLimitBytes: Int = Journal.defaultStoreLimitBytes
    /// Most members this node keeps in its membership table (`SWIMSettings.memberLimit`).
    public var maxMembers: Int = Self.defaultMaxMembers
    public static let defaultMaxMembers = SWIMSettings.defaultMemberLimit
    /// Seconds bytes may wait on a link whose peer reads none of them before the link is closed.
    public var linkStallSeconds: Double = Self.defaultLinkStallSeconds
    /// How long a member may leave broadcasts unacknowledged before it stops pinning this node's
    /// store (it is then a laggard: `CausalBroadcast.Settings.ackDeadline`).
    public var ackDeadlineSeconds: Double = Self.defaultAckDeadlineSeconds
    public static let defaultAckDeadlineSeconds = CausalBroadcast.Settings.defaultAckDeadline
    public static let defaultLinkStallSeconds = LinkBudget().stallSeconds
    /// Handshakes (links and pairings) in progress at once from one source address, and in all;
    /// a connection over either bound is closed unanswered (`HandshakeGate`).
    public var handshakesPerAddress: Int = 16
    /// Seconds a link handshake (or a pairing answered here) may take before its connection is
    /// dropped and its slot freed.
    public var handshakeTimeoutSeconds: Double = Self.defaultHandshakeTimeoutSeconds
    public static let defaultHandshakeTimeoutSeconds: Double = 10
    public var handshakesInAll: Int = 256
    /// A link's send key moves on after this many seconds or bytes of records (`LinkSealer`).
    public var linkRekeyInterval: Double = Self.defaultLinkRekeyInterval
    public static let defaultLinkRekeyInterval = LinkSealer.defaultRekeyInterval
    public var linkRekeyBytes: Int = LinkSealer.defaultRekeyBytes
    /// `--rekey-every`: seconds between routine rotations of the session key (nil: none).
    public var rekeyEvery: Double?
    /// `--rekey-grace`: how long an older epoch's key still lets its holder back in (`EpochSettings.grace`).
    public var rekeyGrace: Double = Self.defaultRekeyGrace
    public static let defaultRekeyGrace = EpochSettings().grace
    /// `--metrics`: `HOST:PORT` where `GET /metrics` serves Prometheus text (nil: not served).
    public var metrics: String?
    /// How much this node relays for other members (`--relay-limit`, `--no-relay`).
    public var relayBudget = RelayCircuits.Budget(bytesPerSecond: Self.defaultRelayLimit)
    /// `--relay-limit`'s default: bytes per second relayed per member.
    public static let defaultRelayLimit = 8 << 20

    public init(keyPath: String, controlPath: String) {
        self.keyPath = keyPath
        self.controlPath = controlPath
    }
}

/// Splits `host:port` (IPv6 as `[::1]:7400`) and checks the port; an empty host is 0.0.0.0.
func parseHostPort(_ text: String) throws(NodeError) -> (host: String, port: Int) {
    do {
        let parsed = try HostPort.split(text)
        return (parsed.host.isEmpty ? "0.0.0.0" : parsed.host, parsed.port)
    } catch {
        throw NodeError("address \(text) \(error)")
    }
}

extension NodeConfiguration {
    /// Parses a `--listen` value (`HOST:PORT`, `:PORT` or `[v6]:PORT`).
    public static func parseListen(_ text: String) throws -> (host: String, port: Int) {
        try parseHostPort(text)
    }
}
