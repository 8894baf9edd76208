import HuddleCrypto

/// What a member keeps of its epoch history across a restart (CONTROL.md, Restart; `ResumePoint`):
/// the key of the oldest epoch on its winning branch that it still holds (with that epoch's admin
/// set, issue 33), every change it keeps (both branches of a fork, an equivocator's pair included),
/// and the removals and cut-offs it remembers beyond them. Recalled, they give the same head, keys,
/// admin set, removed node keys and cut-offs as before the restart: a restarted member never hands
/// a removed key holder back in, nor delivers a removed member's broadcast above its cut-off.
///
/// Stored form: a format byte (`format`, added with issue 33), the root key (bytes, epoch, session
/// id, head), the changes, the remembered removals, the root key's admins (u32 count, 32 bytes
/// each) and the remembered cut-offs (u32 count; origin, node key, seq). A row written before has
/// no format byte (it starts with the root key's length, whose first byte is 0), no admins and no
/// cut-offs, and reads as such; a row with the format byte must hold everything (a truncated one
/// is an error).
public struct EpochMemory: Sendable, Equatable, StoredForm {
    public var rootKey: SessionKey
    public var changes: [EpochChange]
    /// Node keys removed by changes no longer kept, with who removed them (empty: unknown).
    public var removals: [RememberedRemoval]
    /// Cut-offs of changes no longer kept (`EpochHistory+Cutoffs`).
    public var cutoffs: [EpochChange.Cutoff]

    public struct RememberedRemoval: Sendable, Equatable {
        public var node: [UInt8]
        public var by: [UInt8]
        public init(node: [UInt8], by: [UInt8]) { self.node = node; self.by = by }
    }

    public init(rootKey: SessionKey, changes: [EpochChange], removals: [RememberedRemoval], cutoffs: [EpochChange.Cutoff] = []) {
        self.rootKey = rootKey; self.changes = changes; self.removals = removals; self.cutoffs = cutoffs
    }

    /// Most changes and removals one memory carries (above every bound `EpochSettings` keeps).
    static let maximumEntries = 1 << 16
    /// The first byte of the stored form since issue 33 (a row before starts with 0).
    static let format: UInt8 = 0xA3

    func encode(into w: inout WireWriter) {
        w.u8(Self.format)
        w.bytes16(rootKey.bytes); w.u64(rootKey.epoch); w.bytes16(rootKey.sessionID); w.bytes16(rootKey.head)
        w.u32(UInt32(truncatingIfNeeded: changes.count))
        for change in changes { w.bytes32(change.encoded()) }
        w.u32(UInt32(truncatingIfNeeded: removals.count))
        for removal in removals { w.bytes16(removal.node); w.bytes16(removal.by) }
        w.u32(UInt32(truncatingIfNeeded: rootKey.admins.count))
        for admin in rootKey.admins { w.raw(admin) }
        w.u32(UInt32(truncatingIfNeeded: cutoffs.count))
        for c in cutoffs { w.member(c.origin); w.bytes16(c.node); w.u64(c.seq) }
    }

    /// The stored form (a row of the node's state).
    public func encoded() -> [UInt8] { storedBytes(capacity: 4096) }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> EpochMemory { try decodeWhole(bytes, "epoch memory") }

    static func decode(from r: inout WireReader) throws(CoreError) -> EpochMemory {
        let lead = try r.u8("epoch memory format")
        guard lead == format || lead == 0 else { throw CoreError("unknown epoch memory format \(lead)") }
        // A row from before the format byte: `lead` was the high byte of the root key's length.
        let bytes = lead == format ? try r.bytes16("root key") : try r.raw(Int(try r.u8("root key")), "root key")
        let epoch = try r.madeCount("root epoch")
        let sessionID = try r.bytes16("session id"), head = try r.bytes16("root head")
        let n = Int(try r.u32("changes"))
        guard n <= maximumEntries else { throw CoreError("\(n) epoch changes (at most \(maximumEntries))") }
        var changes: [EpochChange] = []
        for _ in 0..<n { changes.append(try EpochChange.decode(try r.bytes32(limit: 1 << 20, "epoch change"))) }
        let m = Int(try r.u32("removals"))
        guard m <= maximumEntries else { throw CoreError("\(m) removals (at most \(maximumEntries))") }
        var removals: [RememberedRemoval] = []
        for _ in 0..<m { removals.append(RememberedRemoval(node: try r.bytes16("removed node"), by: try r.bytes16("remover"))) }
        // Added with issue 33: a row written before has neither (no admins, no remembered cut-offs).
        var admins: [[UInt8]] = []
        var cutoffs: [EpochChange.Cutoff] = []
        if lead == format {
            let a = Int(try r.u32("admins"))
            guard a <= SessionKey.maxAdmins else { throw CoreError("\(a) admins (at most \(SessionKey.maxAdmins))") }
            for _ in 0..<a { admins.append(try r.raw(SessionKey.adminKeyLength, "admin")) }
            let c = Int(try r.u32("cut-offs"))
            guard c <= maximumEntries else { throw CoreError("\(c) cut-offs (at most \(maximumEntries))") }
            for _ in 0..<c {
                cutoffs.append(EpochChange.Cutoff(origin: try r.member("cut-off origin"), node: try r.bytes16("cut-off node"), seq: try r.madeCount("cut-off seq")))
            }
        }
        let rootKey: SessionKey
        do { rootKey = try SessionKey(bytes: bytes, epoch: epoch, sessionID: sessionID, head: head, admins: admins) } catch { throw CoreError("root key: \(error)") }
        return EpochMemory(rootKey: rootKey, changes: changes, removals: removals, cutoffs: cutoffs)
    }
}

extension EpochHistory {
    /// What to keep across a restart (`EpochMemory`); nil when this member holds no key of its
    /// winning branch (it was removed: a restart then starts from its key file and is refused).
    public var memory: EpochMemory? {
        guard let rootKey = chain.lazy.compactMap({ self.keys[$0] }).first else { return nil }
        var removals = rememberedRemovals.map { EpochMemory.RememberedRemoval(node: $0.node, by: $0.by) }
        for node in rootRemoved.sorted(by: bytesPrecede) { removals.append(.init(node: node, by: [])) }
        // Every cut-off in force (kept changes' and remembered ones), as `collectCutoffs` counted
        // them: a change that is not taken up again after the restart must not count unfiltered
        // (its "removal" of a key removed before it would raise that key's cut-off).
        let cutoffs = cutoffs.sorted { $0.key.origin != $1.key.origin ? $0.key.origin < $1.key.origin : bytesPrecede($0.key.node, $1.key.node) }
            .map { EpochChange.Cutoff(origin: $0.key.origin, node: $0.key.node, seq: $0.value) }
        return EpochMemory(rootKey: rootKey, changes: changes, removals: removals, cutoffs: cutoffs)
    }

    /// Changes whenever `memory` would: the shell writes the memory only then.
    public var memoryRevision: Int {
        var hasher = Hasher()
        hasher.combine(head); hasher.combine(entries.count); hasher.combine(keys.count)
        hasher.combine(rememberedRemovals.count); hasher.combine(rootRemoved.count); hasher.combine(equivocators.count)
        hasher.combine(rememberedCutoffs.count); hasher.combine(rememberedCutoffs.values.reduce(0, &+))
        return hasher.finalize()
    }

    /// Takes up `memory` on a history that has seen nothing yet: its root key, its changes (each
    /// checked as on arrival: signature, parent, authority), then its remembered removals.
    public mutating func recall(_ memory: EpochMemory, now: Double) {
        guard memory.rootKey.sessionID == sessionID else { return }
        let offset = wallClockOffset
        self = EpochHistory(key: memory.rootKey, identity: identity, local: local, settings: settings)
        // Its own kept changes were taken once already: none waits for its maker's rate again (a
        // wall clock at infinity releases every one), whatever the clock reads before the first tick.
        wallClockOffset = .infinity
        for change in memory.changes { _ = receive(change, now: now) }
        wallClockOffset = offset
        for removal in memory.removals where removedNodes[removal.node] == nil {
            rememberedRemovals.append((removal.node, removal.by))
        }
        // A change that was not taken up again (it lies below the root key) still removed whom it removed.
        collectRemovals()
        for change in memory.changes {
            for node in change.removed where removedNodes[node] == nil { rememberedRemovals.append((node, change.makerNodeKey)) }
        }
        trimRememberedRemovals()
        collectRemovals()
        // Cut-offs: every one in force when the memory was made (issue 33), so also those of
        // changes not taken up again.
        for c in memory.cutoffs { rememberCutoff(c) }
        collectCutoffs()
    }
}
