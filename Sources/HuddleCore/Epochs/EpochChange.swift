import HuddleCrypto

/// One epoch change: a member (`maker`) moves the session from the epoch whose head is `parent` to
/// epoch `epoch` with a new random session key, handed to every node key of the new epoch's
/// **roster** sealed to that node key, and removes `removed` for good. Signed by the maker's node key.
///
/// Guarantees of a change that `validate()` accepts (the rules about *who* may make it, and where
/// it goes in the history, are `EpochHistory`'s):
/// - it is canonical: removed node keys and the roster sorted and unique, so one content has one
///   encoding and one `hash` (Ed25519 signatures are deterministic);
/// - the maker is on its own roster and removes neither itself nor anyone on the roster;
/// - the signature is the maker's over everything else, so no byte can change in transit;
/// - `keyCheck` commits to the one key every recipient opens (`openKey` checks it), so a maker
///   cannot hand different recipients different keys unnoticed;
/// - every **cut-off** (issue 33) names a member id of a node key the change removes, once, in
///   member order: the highest broadcast seq of that origin the maker had delivered when it made
///   the change. Every member delivers that origin's broadcasts up to the cut-off and refuses
///   every one above it (`EpochHistory.cutoff`, `CausalBroadcast.setCutoff`);
/// - `admins` is the admin set of the epoch it makes (issue 33; sorted, unique, at most
///   `SessionKey.maxAdmins`; empty in a session without admins): signed, so the admin set is part of
///   the session's signed state. `EpochHistory` accepts a set other than the parent's only from an
///   admin of the parent, and never a session without admins getting some (or one with admins
///   losing all); the key it hands out is bound to it (`SessionKey.admins`);
/// - `madeAt` is the maker's signed wall-clock time (milliseconds since 1970, at most 2^52): above
///   the time of the maker's previous change in its ancestry, and what the per-maker rate of
///   changes is measured by (`EpochHistory`'s rate rule) — data every member reads alike.
///
/// Wire form (big-endian, `encoded()`): version 2 (u8), session id (8), epoch (u64, a count),
/// parent (32), maker member id (u64), maker node key (32), made at (u64, ms, a count), removed
/// count (u16) and node keys (32 each), cut-off count (u16) and per cut-off origin member id (u64),
/// node key (32) and seq (u64, a count), key check (32), roster count (u16) and per recipient node
/// key (32) and sealed key (88), signature (64). Version 3 (a session with admins) adds, before the
/// signature, the admin count (u16, 1 to `SessionKey.maxAdmins`) and the admin node keys (32 each):
/// a change without admins is always version 2 (one content, one encoding), so members of a session
/// without admins decode changes as builds before admins did. Every count is checked against the
/// bytes left before anything is made.
public struct EpochChange: Sendable, Equatable {
    /// One member of the new epoch's roster and the new key sealed to its node key.
    public struct Recipient: Sendable, Equatable {
        public var node: [UInt8]
        /// `SealedBox` of the key (32) and the epoch number (u64) to `node`: `sealedKeyLength` bytes.
        public var sealedKey: [UInt8]
        public init(node: [UInt8], sealedKey: [UInt8]) { self.node = node; self.sealedKey = sealedKey }
    }

    /// The last broadcast of a removed origin that counts: `origin` runs as `node` (a node key the
    /// change removes), and its broadcasts above `seq` are refused by every member.
    public struct Cutoff: Sendable, Equatable {
        public var origin: MemberID
        public var node: [UInt8]
        public var seq: UInt64
        public init(origin: MemberID, node: [UInt8], seq: UInt64) { self.origin = origin; self.node = node; self.seq = seq }
    }

    public var session: [UInt8]
    public var epoch: UInt64
    public var parent: [UInt8]
    public var maker: MemberID
    public var makerNodeKey: [UInt8]
    /// The maker's signed wall-clock time, milliseconds since 1970 (see above).
    public var madeAt: UInt64
    public var removed: [[UInt8]]
    /// Per origin of a removed node key, its last broadcast that counts (see above).
    public var cutoffs: [Cutoff]
    public var keyCheck: [UInt8]
    public var recipients: [Recipient]
    /// The admin set of the epoch this change makes (see above; empty: none).
    public var admins: [[UInt8]]
    public var signature: [UInt8]

    /// Most node keys one change removes, and most on one roster: the decoder's bounds.
    public static let maxRemoved = 256
    public static let maxRoster = 1024
    /// Most cut-offs one change carries (origins of the node keys it removes).
    public static let maxCutoffs = 1024
    static let nodeKeyLength = 32
    static let sealedPlaintextLength = SessionKey.length + 8
    public static let sealedKeyLength = sealedPlaintextLength + SealedBox.overhead
    static let version: UInt8 = 2
    /// The version of a change that carries admins.
    static let adminsVersion: UInt8 = 3
    static let signingDomain = Array("huddle-epoch-change v1".utf8)
    static let hashDomain = Array("huddle-epoch-change-hash v1".utf8)

    public init(session: [UInt8], epoch: UInt64, parent: [UInt8], maker: MemberID, makerNodeKey: [UInt8], madeAt: UInt64 = 0,
                removed: [[UInt8]], cutoffs: [Cutoff] = [], keyCheck: [UInt8], recipients: [Recipient], admins: [[UInt8]] = [], signature: [UInt8]) {
        self.session = session; self.epoch = epoch; self.parent = parent; self.maker = maker; self.makerNodeKey = makerNodeKey
        self.madeAt = madeAt; self.removed = removed; self.cutoffs = cutoffs
        self.keyCheck = keyCheck; self.recipients = recipients; self.admins = admins; self.signature = signature
    }

    /// The new epoch's roster: the node keys the key was handed to.
    public var roster: [[UInt8]] { recipients.map(\.node) }

    /// Names this change (and the epoch it makes): BLAKE2b-256 of its whole encoding, signature included.
    public var hash: [UInt8] { BLAKE2b.hash(Self.hashDomain + encoded(), length: 32) }

    // MARK: making and opening

    /// A change made and signed by `identity`: `key` sealed to each of `roster` (any order; sorted
    /// here), ephemeral keys derived from `sealSeed` per recipient. Throws when a roster node key
    /// cannot be sealed to. Public so that a hostile member in the tests (`HuddleAdversary`) signs
    /// changes with our own code; a node makes its changes through `EpochHistory`'s rules.
    /// `cutoffs` in any order (sorted here; one per origin, the highest kept); `admins` likewise
    /// (sorted and made unique here).
    public static func make(session: [UInt8], epoch: UInt64, parent: [UInt8], maker: MemberID, identity: Identity, madeAt: UInt64 = 0,
                     removed: [[UInt8]], cutoffs: [Cutoff] = [], roster: [[UInt8]], admins: [[UInt8]] = [], key: [UInt8], sealSeed: [UInt8]) throws(CryptoError) -> EpochChange {
        let plaintext = key + bigEndian(epoch)
        var recipients: [Recipient] = []
        for node in sortedUnique(roster) {
            let seed = BLAKE2b.hash(node, length: 32, key: sealSeed)
            recipients.append(Recipient(node: node, sealedKey: try SealedBox.seal(plaintext, to: node, ephemeralSeed: seed)))
        }
        var change = EpochChange(session: session, epoch: epoch, parent: parent, maker: maker, makerNodeKey: identity.publicKey, madeAt: madeAt,
                                 removed: sortedUnique(removed), cutoffs: canonical(cutoffs), keyCheck: SessionKey.keyCheck(key), recipients: recipients,
                                 admins: sortedUnique(admins), signature: [])
        change.signature = identity.sign(change.signedBytes())
        return change
    }

    /// The new epoch's key, opened by `identity` from its recipient entry and checked: the epoch
    /// number sealed with it and the key check must match. Nil when `identity` is not a recipient
    /// or its entry does not open or check.
    public func openKey(with identity: Identity) -> SessionKey? {
        guard let entry = recipients.first(where: { $0.node == identity.publicKey }) else { return nil }
        return Self.openSealed(entry.sealedKey, identity: identity, epoch: epoch, session: session, head: hash, keyCheck: keyCheck, admins: admins)
    }

    /// Opens a sealed epoch key (from a change or a grant) and checks it against its epoch and key check.
    /// `admins`: the admin set of that epoch (the change's), which the key is bound to.
    static func openSealed(_ box: [UInt8], identity: Identity, epoch: UInt64, session: [UInt8], head: [UInt8], keyCheck: [UInt8], admins: [[UInt8]]) -> SessionKey? {
        guard let plain = try? SealedBox.open(box, with: identity), plain.count == sealedPlaintextLength else { return nil }
        let key = Array(plain.prefix(SessionKey.length))
        guard Array(plain.suffix(8)) == bigEndian(epoch), SessionKey.keyCheck(key) == keyCheck else { return nil }
        return try? SessionKey(bytes: key, epoch: epoch, sessionID: session, head: head, admins: admins)
    }

    // MARK: validity

    /// Nil when the change is well formed and signed by its maker; the reason otherwise.
    public func validate() -> Refusal? {
        guard epoch >= 1 else { return .epochMalformed }
        guard isSortedUnique(removed), isSortedUnique(roster), isSortedUnique(admins), admins.count <= SessionKey.maxAdmins,
              admins.allSatisfy({ $0.count == Self.nodeKeyLength }) else { return .epochMalformed }
        let roster = Set(self.roster)
        guard roster.contains(makerNodeKey), !removed.contains(where: roster.contains) else { return .epochMalformed }
        // Cut-offs: one per origin, in member order, each of a node key this change removes.
        guard zip(cutoffs, cutoffs.dropFirst()).allSatisfy({ $0.origin < $1.origin }) else { return .epochMalformed }
        if !cutoffs.isEmpty {
            let removed = Set(self.removed)
            guard cutoffs.allSatisfy({ removed.contains($0.node) }) else { return .epochMalformed }
        }
        guard Identity.verify(signature: signature, message: signedBytes(), publicKey: makerNodeKey) else { return .epochBadSignature }
        return nil
    }

    // MARK: codec

    func signedBytes() -> [UInt8] {
        var w = WireWriter(capacity: 128 + recipients.count * 120)
        w.raw(Self.signingDomain)
        encodeUnsigned(into: &w)
        return w.bytes
    }

    private func encodeUnsigned(into w: inout WireWriter) {
        w.u8(admins.isEmpty ? Self.version : Self.adminsVersion); w.raw(session); w.u64(epoch); w.raw(parent); w.member(maker); w.raw(makerNodeKey); w.u64(madeAt)
        w.u16(UInt16(truncatingIfNeeded: removed.count)); for node in removed { w.raw(node) }
        w.u16(UInt16(truncatingIfNeeded: cutoffs.count)); for c in cutoffs { w.member(c.origin); w.raw(c.node); w.u64(c.seq) }
        w.raw(keyCheck)
        w.u16(UInt16(truncatingIfNeeded: recipients.count))
        for r in recipients { w.raw(r.node); w.raw(r.sealedKey) }
        if !admins.isEmpty {
            w.u16(UInt16(truncatingIfNeeded: admins.count)); for node in admins { w.raw(node) }
        }
    }

    public func encode(into w: inout WireWriter) {
        encodeUnsigned(into: &w)
        w.raw(signature)
    }

    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: 256 + recipients.count * 120)
        encode(into: &w)
        return w.bytes
    }

    public static func decode(from r: inout WireReader) throws(CoreError) -> EpochChange {
        let version = try r.u8("epoch change version")
        guard version == Self.version || version == adminsVersion else { throw CoreError("unknown epoch change version") }
        let session = try r.raw(SessionKey.sessionIDLength, "session id")
        let epoch = try r.count("epoch")
        let parent = try r.raw(SessionKey.headLength, "parent")
        let maker = try r.member("maker")
        let makerNodeKey = try r.raw(nodeKeyLength, "maker node key")
        let madeAt = try r.madeCount("made at")
        let removedCount = try r.count16(minItemSize: nodeKeyLength, "removed")
        guard removedCount <= maxRemoved else { throw CoreError("an epoch change removing \(removedCount) node keys (at most \(maxRemoved))") }
        var removed: [[UInt8]] = []
        for _ in 0..<removedCount { removed.append(try r.raw(nodeKeyLength, "removed node key")) }
        let cutoffCount = try r.count16(minItemSize: 8 + nodeKeyLength + 8, "cut-offs")
        guard cutoffCount <= maxCutoffs else { throw CoreError("an epoch change with \(cutoffCount) cut-offs (at most \(maxCutoffs))") }
        var cutoffs: [Cutoff] = []
        for _ in 0..<cutoffCount {
            cutoffs.append(Cutoff(origin: try r.member("cut-off origin"), node: try r.raw(nodeKeyLength, "cut-off node key"), seq: try r.madeCount("cut-off seq")))
        }
        let keyCheck = try r.raw(32, "key check")
        let rosterCount = try r.count16(minItemSize: nodeKeyLength + sealedKeyLength, "roster")
        guard rosterCount <= maxRoster else { throw CoreError("an epoch change to \(rosterCount) node keys (at most \(maxRoster))") }
        var recipients: [Recipient] = []
        recipients.reserveCapacity(rosterCount)
        for _ in 0..<rosterCount {
            recipients.append(Recipient(node: try r.raw(nodeKeyLength, "roster node key"), sealedKey: try r.raw(sealedKeyLength, "sealed key")))
        }
        var admins: [[UInt8]] = []
        if version == adminsVersion {
            let adminCount = try r.count16(minItemSize: nodeKeyLength, "admins")
            // Version 3 always carries admins: an empty set is version 2 (one content, one encoding).
            guard (1...SessionKey.maxAdmins).contains(adminCount) else {
                throw CoreError("an epoch change with \(adminCount) admins (1 to \(SessionKey.maxAdmins))")
            }
            for _ in 0..<adminCount { admins.append(try r.raw(nodeKeyLength, "admin node key")) }
        }
        let signature = try r.raw(64, "epoch change signature")
        return EpochChange(session: session, epoch: epoch, parent: parent, maker: maker, makerNodeKey: makerNodeKey, madeAt: madeAt,
                           removed: removed, cutoffs: cutoffs, keyCheck: keyCheck, recipients: recipients, admins: admins, signature: signature)
    }

    /// Decodes one change that fills `bytes` exactly.
    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> EpochChange {
        var r = WireReader(bytes)
        let change = try decode(from: &r)
        try r.expectEnd("epoch change")
        return change
    }
}

/// `a` before `b` in byte order: the order of node keys and hashes everywhere in the epoch rules.
func bytesPrecede(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }

func sortedUnique(_ keys: [[UInt8]]) -> [[UInt8]] {
    var out: [[UInt8]] = []
    for key in keys.sorted(by: bytesPrecede) where out.last != key { out.append(key) }
    return out
}

/// Cut-offs in member order, one per origin (the highest seq kept), at most `EpochChange.maxCutoffs`.
private func canonical(_ cutoffs: [EpochChange.Cutoff]) -> [EpochChange.Cutoff] {
    var out: [EpochChange.Cutoff] = []
    for c in cutoffs.sorted(by: { $0.origin != $1.origin ? $0.origin < $1.origin : $0.seq > $1.seq }) where out.last?.origin != c.origin {
        out.append(c)
    }
    return Array(out.prefix(EpochChange.maxCutoffs))
}

private func isSortedUnique(_ keys: [[UInt8]]) -> Bool {
    zip(keys, keys.dropFirst()).allSatisfy { bytesPrecede($0, $1) }
}

func bigEndian(_ v: UInt64) -> [UInt8] { withUnsafeBytes(of: v.bigEndian) { Array($0) } }
