import HuddleCrypto

/// What a member keeps of its journal across a restart (CONTROL.md, Restart): every attachment it
/// knew, removed ones included (so a removal is never undone by a restart), and whether `complete`
/// was already reported. Taken by `Journal.memory`, handed back to `Journal.recall`.
///
/// Guarantees: `decode` never traps and refuses bytes it did not write (at most `maximumRecords`);
/// `recall` takes only records whose manifest is valid and commits to its key, emits no event
/// (the events were emitted before the restart), and the chunks are not counted as held until the
/// shell has checked them against their hashes (`recovered`) — except an uploader's own, as when
/// it added them.
public struct JournalMemory: Sendable, Equatable {
    public struct Kept: Sendable, Equatable {
        public var manifest: Manifest
        public var key: [UInt8]
        public var removed: Bool
        public var completeEmitted: Bool
    }

    public var records: [Kept]

    static let version: UInt8 = 1
    /// Most records a memory carries (far above what a store of 2 GiB holds in attachments).
    static let maximumRecords = 1 << 16

    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: 16 + records.reduce(0) { $0 + 512 + 32 * $1.manifest.chunkCount })
        w.u8(Self.version)
        w.u32(UInt32(truncatingIfNeeded: records.count))
        for kept in records {
            kept.manifest.encode(into: &w)
            w.raw(kept.key)
            w.u8((kept.removed ? 1 : 0) | (kept.completeEmitted ? 2 : 0))
        }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> JournalMemory {
        var r = WireReader(bytes)
        guard try r.u8("version") == version else { throw CoreError("unsupported journal memory version") }
        let n = Int(try r.u32("journal records"))
        guard n <= maximumRecords else { throw CoreError("\(n) journal records (at most \(maximumRecords))") }
        var records: [Kept] = []
        for _ in 0..<n {
            let manifest = try Manifest.decode(from: &r)
            let key = try r.raw(32, "attachment key")
            let flags = try r.u8("journal record flags")
            guard flags & ~3 == 0 else { throw CoreError("bad journal record flags \(flags)") }
            records.append(Kept(manifest: manifest, key: key, removed: flags & 1 != 0, completeEmitted: flags & 2 != 0))
        }
        try r.expectEnd("journal memory")
        return JournalMemory(records: records)
    }
}

extension Journal {
    /// The journal as a restart takes it up (see `JournalMemory`), in id order.
    /// At most `JournalMemory.maximumRecords`: live attachments first, then removed ones (a removal
    /// past the bound may be forgotten by a restart — and then come back with a catch-up).
    public var memory: JournalMemory {
        let kept = records.keys.sorted().compactMap { id in
            records[id].map { JournalMemory.Kept(manifest: $0.manifest, key: $0.key, removed: $0.removed, completeEmitted: $0.completeEmitted) }
        }
        return JournalMemory(records: Array((kept.filter { !$0.removed } + kept.filter(\.removed)).prefix(JournalMemory.maximumRecords)))
    }

    /// Takes up what a previous run of this member knew (before any other input): attachments
    /// are known again without an `added` event, removed ones stay removed.
    public mutating func recall(_ memory: JournalMemory, now: Double) {
        for kept in memory.records where records[kept.manifest.id] == nil && kept.manifest.commits(to: kept.key) && kept.manifest.isValid() {
            let id = kept.manifest.id
            var record = Record(manifest: kept.manifest, key: kept.key)
            record.completeEmitted = kept.completeEmitted
            if kept.removed {
                record.state = .removed
            } else {
                swarm.add(id: id, chunkCount: kept.manifest.chunkCount, chunkBytes: Int(kept.manifest.chunkSize) + AEAD.tagLength,
                          uploader: kept.manifest.uploader, haveAll: kept.manifest.uploader == local, now: now, recalled: true)
            }
            records[id] = record
        }
        revision &+= 1
    }
}
