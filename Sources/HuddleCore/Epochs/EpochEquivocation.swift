import HuddleCrypto

/// Evidence that one maker **equivocated**: it signed two different epoch changes on the same
/// parent. Honest software never does (a member makes a change only on its head, and its head
/// moves to that change at once), so the pair proves the maker's node key is run by someone who
/// forks the history on purpose, or by two nodes at once — either way it is excluded
/// (`EpochHistory` counts it as removed, by itself, and its changes lose every fork choice).
///
/// Guarantee: `verify` is a pure function of the two changes and the session id, so any member
/// (or anyone holding the two changes) checks the evidence for itself; no member's word is needed.
public struct EpochEquivocation: Sendable, Equatable {
    /// The two changes, lower hash first.
    public let first: EpochChange
    public let second: EpochChange

    /// The evidence made of `a` and `b` (any order), or nil when they do not prove an equivocation.
    public init?(_ a: EpochChange, _ b: EpochChange, session: [UInt8]) {
        guard Self.verify(a, b, session: session) else { return nil }
        (first, second) = bytesPrecede(a.hash, b.hash) ? (a, b) : (b, a)
    }

    /// The node key that equivocated.
    public var maker: [UInt8] { first.makerNodeKey }

    /// Whether `a` and `b` prove that their maker equivocated in session `session`: both of the
    /// session, both well formed and signed by the same node key, on the same parent, and not the
    /// same change.
    public static func verify(_ a: EpochChange, _ b: EpochChange, session: [UInt8]) -> Bool {
        a.session == session && b.session == session && a.makerNodeKey == b.makerNodeKey && a.parent == b.parent
            && a.hash != b.hash && a.validate() == nil && b.validate() == nil
    }
}
