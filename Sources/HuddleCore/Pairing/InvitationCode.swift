/// A one-time pairing code as a person reads it: `7-crossover-clockwork-ribbon` — the nameplate
/// (which invitation, a number the member picked) and `wordCount` words from `InvitationWords`.
///
/// Guarantees: the words carry `entropyBits` = 4 × 11 = 44 bits drawn uniformly by the member (the
/// nameplate adds none: it is not secret); `parse` accepts what `text` prints in any letter case, with
/// blanks around it or in place of the dashes, and refuses anything else with an
/// `CoreError` (`badInvitationCode`) that says what is wrong; `text` (the normalised form) is the PAKE password.
public struct InvitationCode: Sendable, Equatable, CustomStringConvertible {
    public static let wordCount = 4
    public static let entropyBits = wordCount * 11  // log2(2048) per word
    /// Nameplates are 1 ... maximumNameplate (short to read aloud; not secret).
    public static let maximumNameplate: UInt32 = 9999

    public let nameplate: UInt32
    public let words: [String]

    /// The code from a nameplate and `wordCount` × 2 random bytes (each pair picks one word, modulo 2048: uniform).
    public init(nameplate: UInt32, randomBytes: [UInt8]) {
        precondition(randomBytes.count >= Self.wordCount * 2, "an invitation code needs \(Self.wordCount * 2) random bytes")
        self.nameplate = nameplate
        words = (0..<Self.wordCount).map { i in
            InvitationWords.all[(Int(randomBytes[2 * i]) << 8 | Int(randomBytes[2 * i + 1])) & 2047]
        }
    }

    /// The normalised form: `nameplate-word-word-word-word`, lower case.
    public var text: String { ([String(nameplate)] + words).joined(separator: "-") }
    public var description: String { text }

    public static func parse(_ input: String) throws(CoreError) -> InvitationCode {
        // Dashes or blanks between the parts: a code read aloud may be typed with spaces.
        let parts = input.lowercased().split(whereSeparator: { $0 == "-" || $0.isWhitespace }).map(String.init)
        guard let first = parts.first, let nameplate = UInt32(first), (1...maximumNameplate).contains(nameplate) else {
            throw .badNameplate(parts.first ?? "")
        }
        let words = Array(parts.dropFirst())
        guard words.count == wordCount else { throw .wordCount(words.count) }
        for word in words where InvitationWords.index[word] == nil { throw .unknownWord(word) }
        return InvitationCode(nameplate: nameplate, checkedWords: words)
    }

    private init(nameplate: UInt32, checkedWords: [String]) {
        self.nameplate = nameplate
        words = checkedWords
    }
}
