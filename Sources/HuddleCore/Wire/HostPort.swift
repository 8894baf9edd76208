#if canImport(Glibc)
import Glibc
#endif

/// A `host:port` address as members advertise it (IPv6 in brackets: `[::1]:7400`).
///
/// Guarantees: `split` never traps and reads the port as 0...65535; `numeric` takes only an
/// IPv4 dotted quad or a bracketed IPv6 address, read by `inet_pton` (which never looks anything
/// up), and a port 1...65535. An address a peer supplies — a member record's, a `pingReq` target —
/// is used only when it is `numeric`, so nothing a peer says makes this member ask DNS.
public struct HostPort: Sendable, Equatable {
    public let host: String
    public let port: Int
    /// Whether `host` is an IPv6 address (it was written in brackets).
    public let bracketed: Bool

    /// Splits `text` at its port; the host may be empty or a name (nothing is checked about it).
    /// Throws `CoreError.Code.badAddress` (`noPort`, `badPort`).
    public static func split(_ text: String) throws(CoreError) -> HostPort {
        let host: Substring, portText: Substring, bracketed: Bool
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw .noPort(bracketed: true) }
            portText = rest.dropFirst()
            bracketed = true
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw .noPort(bracketed: false) }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            bracketed = false
        }
        guard let port = Int(portText), (0...65535).contains(port) else { throw .badPort }
        return HostPort(host: String(host), port: port, bracketed: bracketed)
    }

    /// `text` when it is a numeric IPv4 `a.b.c.d:port` or IPv6 `[addr]:port` with a port
    /// 1...65535; nil for anything else (a hostname above all).
    public static func numeric(_ text: String) -> HostPort? {
        guard text.utf8.count <= MemberInfo.maximumAddress, let parsed = try? split(text), parsed.port > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 16)
        let family = parsed.bracketed ? AF_INET6 : AF_INET
        return inet_pton(family, parsed.host, &buffer) == 1 ? parsed : nil
    }

    /// Whether `text` is `numeric`.
    public static func isNumeric(_ text: String) -> Bool { numeric(text) != nil }

    /// Whether `text` is a `numeric` address another host could be reached at: not unspecified
    /// (0.0.0.0, ::: on Linux a connect there reaches this host), loopback, multicast or the IPv4
    /// broadcast address. What hole punching dials (a reach address comes from another member).
    public static func isRemoteUnicast(_ text: String) -> Bool {
        guard let parsed = numeric(text) else { return false }
        var b = [UInt8](repeating: 0, count: 16)
        if parsed.bracketed {
            guard inet_pton(AF_INET6, parsed.host, &b) == 1 else { return false }
            let unspecified = b.allSatisfy { $0 == 0 }
            let loopback = b[0..<15].allSatisfy { $0 == 0 } && b[15] == 1
            return !unspecified && !loopback && b[0] != 0xff
        }
        guard inet_pton(AF_INET, parsed.host, &b) == 1 else { return false }
        let unspecified = b[0..<4].allSatisfy { $0 == 0 }, broadcast = b[0..<4].allSatisfy { $0 == 0xff }
        return !unspecified && !broadcast && b[0] != 0 && b[0] != 127 && !(224...239).contains(b[0])
    }
}
