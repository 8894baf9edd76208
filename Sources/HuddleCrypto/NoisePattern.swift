/// A Noise handshake pattern as data (Noise spec rev 34, sections 7 and 9): pre-message tokens
/// and message token lists, with psk modifiers applied. Every fundamental, one-way and deferred
/// pattern of the spec is here; `named(_:)` parses names such as `XXpsk0` or `NNpsk0+psk2`.
public struct NoisePattern: Sendable, Equatable {
    public enum Token: String, Sendable { case e, s, ee, es, se, ss, psk }

    public let name: String
    /// The pattern without modifiers, e.g. `XX` for `XXpsk0`.
    public let baseName: String
    /// Keys known before the handshake: the initiator's, then the responder's.
    public let initiatorPreMessage: [Token]
    public let responderPreMessage: [Token]
    /// Messages in order; even indexes are sent by the initiator.
    public let messages: [[Token]]
    public var isOneWay: Bool { Self.oneWay.contains(baseName) }
    public var hasPSK: Bool { messages.contains { $0.contains(.psk) } }

    static let oneWay: Set<String> = ["N", "K", "X"]

    private static let table: [String: (String, String, [String])] = [
        "N": ("", "s", ["e, es"]),
        "K": ("s", "s", ["e, es, ss"]),
        "X": ("", "s", ["e, es, s, ss"]),
        "NN": ("", "", ["e", "e, ee"]),
        "NK": ("", "s", ["e, es", "e, ee"]),
        "NX": ("", "", ["e", "e, ee, s, es"]),
        "XN": ("", "", ["e", "e, ee", "s, se"]),
        "XK": ("", "s", ["e, es", "e, ee", "s, se"]),
        "XX": ("", "", ["e", "e, ee, s, es", "s, se"]),
        "KN": ("s", "", ["e", "e, ee, se"]),
        "KK": ("s", "s", ["e, es, ss", "e, ee, se"]),
        "KX": ("s", "", ["e", "e, ee, se, s, es"]),
        "IN": ("", "", ["e, s", "e, ee, se"]),
        "IK": ("", "s", ["e, es, s, ss", "e, ee, se"]),
        "IX": ("", "", ["e, s", "e, ee, se, s, es"]),
        "NK1": ("", "s", ["e", "e, ee, es"]),
        "NX1": ("", "", ["e", "e, ee, s", "es"]),
        "X1N": ("", "", ["e", "e, ee", "s", "se"]),
        "X1K": ("", "s", ["e, es", "e, ee", "s", "se"]),
        "XK1": ("", "s", ["e", "e, ee, es", "s, se"]),
        "X1K1": ("", "s", ["e", "e, ee, es", "s", "se"]),
        "X1X": ("", "", ["e", "e, ee, s, es", "s", "se"]),
        "XX1": ("", "", ["e", "e, ee, s", "es, s, se"]),
        "X1X1": ("", "", ["e", "e, ee, s", "es, s", "se"]),
        "K1N": ("s", "", ["e", "e, ee", "se"]),
        "K1K": ("s", "s", ["e, es", "e, ee", "se"]),
        "KK1": ("s", "s", ["e", "e, ee, se, es"]),
        "K1K1": ("s", "s", ["e", "e, ee, es", "se"]),
        "K1X": ("s", "", ["e", "e, ee, s, es", "se"]),
        "KX1": ("s", "", ["e", "e, ee, se, s", "es"]),
        "K1X1": ("s", "", ["e", "e, ee, s", "se, es"]),
        "I1N": ("", "", ["e, s", "e, ee", "se"]),
        "I1K": ("", "s", ["e, es, s", "e, ee", "se"]),
        "IK1": ("", "s", ["e, s", "e, ee, se, es"]),
        "I1K1": ("", "s", ["e, s", "e, ee, es", "se"]),
        "I1X": ("", "", ["e, s", "e, ee, s, es", "se"]),
        "IX1": ("", "", ["e, s", "e, ee, se, s", "es"]),
        "I1X1": ("", "", ["e, s", "e, ee, s", "se, es"]),
    ]

    /// Every base pattern name this engine knows.
    public static var supportedBaseNames: [String] { table.keys.sorted() }

    /// Parses a pattern name with optional modifiers, e.g. `IKpsk2` or `NNpsk0+psk2`.
    public static func named(_ fullName: String) throws -> NoisePattern {
        var base = ""
        var rest = Substring(fullName)
        for (i, ch) in fullName.enumerated() {
            if ch.isLowercase {
                base = String(fullName.prefix(i))
                rest = fullName.dropFirst(i)
                break
            }
            base = fullName
            rest = ""
        }
        guard let (ipre, rpre, messageText) = table[base] else { throw CryptoError("unsupported Noise pattern \(fullName)") }
        func tokens(_ text: String) throws -> [Token] {
            try text.split(separator: ",").map { raw in
                let t = raw.trimmingCharacters(in: .whitespaces)
                guard let token = Token(rawValue: t) else { throw CryptoError("bad token \(t) in pattern \(base)") }
                return token
            }
        }
        var messages = try messageText.map(tokens)
        if !rest.isEmpty {
            for modifier in rest.split(separator: "+") {
                guard modifier.hasPrefix("psk"), let n = Int(modifier.dropFirst(3)), n >= 0, n <= messages.count else {
                    throw CryptoError("unsupported Noise modifier \(modifier) in \(fullName)")
                }
                if n == 0 { messages[0].insert(.psk, at: 0) } else { messages[n - 1].append(.psk) }
            }
        }
        return NoisePattern(name: fullName, baseName: base, initiatorPreMessage: try tokens(ipre), responderPreMessage: try tokens(rpre), messages: messages)
    }
}
