import Logging
import Foundation
import HuddleControl
import HuddleCore
import HuddleCrypto

extension Node {
    /// The attachments this member knows, removed ones included (the journal's table).
    var attachments: [String: Journal.Record] { journal.records }

    // MARK: control operations

    /// Chunks, stores and announces a file; returns the attachment once every member can fetch it.
    func addAttachment(path: String, name: String?, meta: JSON) async throws(ControlError) -> JSONObject {
        guard path.hasPrefix("/") else { throw ControlError(.badRequest, "\"path\" must be absolute") }
        let store = self.store, limit = config.maxAttachmentBytes
        // Every look at the file system happens off the actor.
        let size = try await Self.fileWork { () throws(ControlError) -> Int in
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
                throw ControlError(.notFound, "no file at \(path)")
            }
            let size = ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? 0
            guard size <= limit else {
                throw ControlError(.tooLarge, "\(path) is \(size) bytes; the attachment limit is \(limit)")
            }
            return size
        }
        // The store budget is the core's (the journal's, which fetching is held to too): checked
        // before the import, and again after it, when another import may have taken the room.
        let storeFull = ControlError(.tooLarge, "the store would exceed its limit of \(config.storeLimitBytes) bytes")
        guard core.storeFits(attachmentOf: size) else { throw storeFull }
        var metaBytes: [UInt8] = []
        meta.write(into: &metaBytes)
        guard metaBytes.count <= Manifest.maximumMeta else { throw ControlError(.tooLarge, "\"meta\" is \(metaBytes.count) bytes; the limit is 16384") }
        let staging = "import-\(hexString(SecureRandom.bytes(8)))"
        let imported: (hashes: [[UInt8]], size: UInt64, key: [UInt8])
        do {
            imported = try await BulkWork.run { try store.importFile(path: path, chunkSize: Manifest.defaultChunkSize, storeAs: staging, workers: ProcessInfo.processInfo.activeProcessorCount) }
        } catch {
            _ = try? await BulkWork.run { store.remove(staging) }
            throw ControlError(.ioError, "cannot read \(path): \(error)")
        }
        var manifest = Manifest(name: name ?? (path as NSString).lastPathComponent, size: imported.size, chunkSize: UInt32(Manifest.defaultChunkSize),
                                chunkHashes: imported.hashes, meta: metaBytes, uploader: local.id, uploaderNodeKey: local.node, signature: [])
        manifest.sign(with: security.identity, key: imported.key)
        let id = manifest.id
        try await Self.fileWork { () throws(ControlError) in
            do { try store.rename(staging, to: id) } catch { throw ControlError(.ioError, "\(error)") }
        }
        // Nothing suspends from here to `addAttachment`: no other add takes the room in between.
        guard core.storeFits(attachmentOf: Int(clamping: imported.size)) else {
            _ = try? await BulkWork.run { store.remove(id) }
            throw storeFull
        }
        execute(core.addAttachment(manifest, key: imported.key, now: now))
        return ["attachment": attachmentJSON(manifest.id)]
    }

    func removeAttachment(_ id: String) throws(ControlError) {
        let effects: [SessionEffect]
        do {
            effects = try core.removeAttachment(id, now: now)
        } catch {
            throw ControlError(error.code == .noSuchAttachment ? .notFound : .notMember, error.message)
        }
        execute(effects)
    }

    /// Writes the attachment's plaintext to `path` (temporary file + rename) with permission bits
    /// `mode` (0600 unless the client asked), waiting for its chunks when `wait` is set; fails at
    /// once when some chunk has no live holder.
    func getAttachment(_ id: String, to path: String, wait: Bool, timeout: Duration, mode: mode_t) async throws(ControlError) -> JSONObject {
        guard path.hasPrefix("/") else { throw ControlError(.badRequest, "\"path\" must be absolute") }
        let deadline = ContinuousClock.now + timeout
        // An id announced elsewhere a moment ago may still be on its way here: give it a few seconds.
        let appearBy = ContinuousClock.now + min(timeout, .seconds(5))
        while attachments[id] == nil && wait && ContinuousClock.now < appearBy && mayWait {
            await self.wait(for: .attachment(id), until: min(appearBy, .now + .milliseconds(200)))
        }
        while true {
            guard let a = attachments[id], !a.removed else { throw ControlError(.notFound, "no attachment \(id)") }
            if journal.swarm.have(id)?.isFull ?? false { break }
            guard !journal.stoppedByStore.contains(id) else {
                throw ControlError(.tooLarge, "attachment \(id) does not fit the store here: its limit is \(journal.storeLimitBytes) bytes")
            }
            guard a.state != .unavailable else { throw ControlError(.unavailable, "attachment \(id) has chunks that no live member holds") }
            guard wait else { throw ControlError(.unavailable, "attachment \(id) is not complete here yet") }
            guard ContinuousClock.now < deadline else { throw ControlError(.timeout, "attachment \(id) did not complete in time") }
            guard mayWait else { throw ControlError(.unavailable, "the node is stopping; attachment \(id) is not complete here") }
            await self.wait(for: .attachment(id), until: min(deadline, .now + .seconds(1)))
        }
        guard let a = attachments[id] else { throw ControlError(.notFound, "no attachment \(id)") }
        let store = self.store
        do {
            try await BulkWork.run { try Self.writePlaintext(a.manifest, key: a.key, store: store, to: path, mode: mode) }
        } catch let error as ControlError {
            if error.code == .internal, case let index? = Int(error.message) {
                execute(core.chunksLost(id: id, [index], now: now).effects)
                _ = counters.corruptChunks.wrappingAdd(1, ordering: .relaxed)
                verifyStoredCopy(id)
                throw ControlError(.ioError, "chunk \(index) of \(id) was damaged on disk; it is being fetched again")
            }
            throw error
        } catch {
            throw ControlError(.ioError, "cannot write \(path): \(error)")
        }
        return ["attachment": attachmentJSON(id), "path": .string(path)]
    }

    /// Decrypts chunk by chunk into `path.part-…`, then renames it over `path`, so a reader sees
    /// the old file or the whole new one. Every chunk is authenticated by its AEAD tag as it is
    /// opened (the store holds only chunks whose hash was checked when they arrived), so a chunk
    /// damaged on disk fails here and is named in the error. Like `cp`, it does not fsync.
    /// The file is created 0600 and set to exactly `mode` (the umask does not apply) before any
    /// plaintext is written, so it is never readable more widely than asked.
    nonisolated static func writePlaintext(_ manifest: Manifest, key: [UInt8], store: ChunkStore, to path: String, mode: mode_t) throws {
        IOThreads.check("an attachment's export")
        let temporary = "\(path).part-\(hexString(SecureRandom.bytes(4)))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ControlError(.ioError, "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        do {
            guard fchmod(fd, mode) == 0 else {
                throw ControlError(.ioError, "cannot set mode \(String(mode, radix: 8)) on \(temporary): \(String(cString: strerror(errno)))")
            }
            for index in 0..<manifest.chunkCount {
                guard let sealed = store.read(manifest, index), let plain = try? ChunkCipher.open(sealed, index: index, key: key) else {
                    throw ControlError(.internal, "\(index)")
                }
                guard plain.withUnsafeBytes({ writeAll(fd, $0) }) else {
                    throw ControlError(.ioError, "cannot write \(temporary): \(String(cString: strerror(errno)))")
                }
            }
            close(fd)
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw ControlError(.ioError, "cannot rename \(temporary) to \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Runs `body` on `BulkWork`, keeping its typed error.
    static func fileWork<T: Sendable>(_ body: @escaping @Sendable () throws(ControlError) -> T) async throws(ControlError) -> T {
        let result: Result<T, ControlError>
        do {
            result = try await BulkWork.run { () -> Result<T, ControlError> in
                do throws(ControlError) { return .success(try body()) } catch { return .failure(error) }
            }
        } catch {
            throw ControlError(.ioError, "\(error)")
        }
        return try result.get()
    }

    // MARK: chunks

    /// Reads a chunk this member holds on `ChunkIO`, then sends it to the peer (`chunkRead`). The
    /// session core admitted the read (`Journal.servesPerPeer` per peer) and is told how it ended.
    func serveChunk(id: String, index: Int, to link: LinkHandle) {
        guard let a = attachments[id] else { return core.chunkServeDropped(to: link.peer.id) }
        let manifest = a.manifest, store = self.store
        spawner.spawn { [self] in
            let sealed = (try? await ChunkIO.run { store.read(manifest, index) }) ?? nil
            await chunkRead(id: id, index: index, sealed: sealed, for: link)
        }
    }

    private func chunkRead(id: String, index: Int, sealed: [UInt8]?, for link: LinkHandle) {
        // Not hashed again here: the receiver checks every chunk against the manifest (DESIGN.md),
        // and never asks this member for that chunk again if it fails.
        // An input outside `execute`: the timer is armed for what it changed (an uploader's offers).
        defer { shell.rearm() }
        switch core.chunkRead(id: id, index: index, found: sealed != nil, for: link.peer.id, now: now) {
        case .send:
            guard let sealed else { return }
            link.sendChunk(id: id, index: index, body: sealed)
            _ = counters.chunksServed.wrappingAdd(1, ordering: .relaxed)
        case .missing: log.warning("chunk \(index) of \(id) is missing on disk; fetching it again")
        case .notHeld: break
        }
    }

    /// A peer says the copy of a chunk this member sent it failed its hash. Serving does not re-hash
    /// (receivers verify), so the stored copy is checked now, off the actor: a good one stays (a
    /// peer cannot make this member drop it, and a false report costs one chunk's hash); a damaged
    /// one means the whole stored copy of the attachment is checked (`verifyStoredCopy`).
    func recheckChunk(id: String, index: Int, reportedBy peer: MemberID) {
        log.info("\(peer) reported chunk \(index) of \(id) damaged; checking the stored copy")
        verifyStoredCopy(id, first: index)
    }

    /// Checks the chunks this member holds of attachment `id` against the manifest's hashes on
    /// `BulkWork` (chunk `first` alone first, when given: if it is intact nothing more is read),
    /// then drops every damaged chunk so it is fetched again. Damage found in one chunk — by a
    /// peer's report or by this member's own read — checks them all: disk damage is rarely confined
    /// to one chunk, and a peer that received a bad chunk never asks this member for that chunk
    /// again, so the other damaged chunks would otherwise stay until someone happened to ask.
    /// One check per attachment at a time.
    func verifyStoredCopy(_ id: String, first: Int? = nil) {
        guard let a = attachments[id], !a.removed, let have = journal.swarm.have(id), verifying.insert(id).inserted else { return }
        let manifest = a.manifest
        let held = (0..<manifest.chunkCount).filter { have[$0] }
        let store = self.store
        spawner.spawn { [self] in
            let damaged = (try? await BulkWork.run { () -> [Int] in
                let isDamaged = { (index: Int) -> Bool in
                    guard let sealed = store.read(manifest, index) else { return true }
                    return ChunkCipher.hash(sealed) != manifest.chunkHashes[index]
                }
                if let first, !isDamaged(first) { return [] }
                return held.filter(isDamaged)
            }) ?? []
            await storedCopyVerified(id, damaged: damaged)
        }
    }

    /// A resumed member's chunk store against the journal it took up, before the node serves or
    /// imports anything: the chunks of every attachment it knew are checked and held again
    /// (`recoverStoredCopy`); with `deleteUnknown` (the journal was kept: a data directory of an
    /// earlier version has none), the files of removed or unknown attachments go (a crash between
    /// a removal and its file's deletion, an import a crash cut short). The store is listed, read
    /// and hashed on `BulkWork`, never on the actor.
    func recoverStore(deleteUnknown: Bool) async {
        let known = attachments
        if deleteUnknown {
            let kept = Set(known.filter { !$0.value.removed }.keys), store = self.store
            _ = try? await BulkWork.run {
                for name in store.fileNames() where !kept.contains(name) { store.remove(name) }
            }
        }
        for (id, record) in known.sorted(by: { $0.key < $1.key }) where !record.removed { await recoverStoredCopy(id) }
    }

    /// An attachment learned again after a restart whose chunk file an earlier run left in the
    /// store: every chunk in it whose hash matches the manifest is held again, never fetched. Read
    /// and hashed on `BulkWork` (at most the attachment's size, once per attachment after a
    /// restart); a chunk that arrived from a peer meanwhile is not counted twice.
    func recoverStoredCopy(_ id: String) async {
        guard let a = attachments[id], !a.removed else { return }
        let manifest = a.manifest, store = self.store
        let wanted = (0..<manifest.chunkCount).filter { !journal.holds(id, $0) }
        guard !wanted.isEmpty else { return }
        let intact = (try? await BulkWork.run { () -> [Int] in
            guard store.hasFile(id) else { return [] }
            return wanted.filter { index in
                guard let sealed = store.read(manifest, index) else { return false }
                return ChunkCipher.hash(sealed) == manifest.chunkHashes[index]
            }
        }) ?? []
        var recovered = 0
        for index in intact {
            // Removed, or held already (a peer's copy was written meanwhile): nothing to recover.
            guard let record = attachments[id], !record.removed else { return }
            guard !journal.holds(id, index) else { continue }
            execute(core.chunkRecovered(id: id, index: index, now: now))
            recovered += 1
        }
        if recovered > 0 { log.info("\(recovered) of \(manifest.chunkCount) chunks of \(id) were stored before the restart: not fetched again") }
    }

    private func storedCopyVerified(_ id: String, damaged: [Int]) {
        verifying.remove(id)
        guard let a = attachments[id], !a.removed else { return }
        let (dropped, effects) = core.chunksLost(id: id, damaged, now: now)
        guard dropped > 0 else {
            log.info("the stored copy of \(id) matches its hashes")
            return
        }
        _ = counters.corruptChunks.wrappingAdd(dropped, ordering: .relaxed)
        log.warning("\(dropped) of \(a.manifest.chunkCount) stored chunks of \(id) are damaged on disk; fetching them again")
        execute(effects)
    }

    /// A chunk body arrived (requested, or pushed by a leaving member) with its BLAKE2b hash.
    /// Returns the manifest when the core admitted it to the store: the link's task then writes it
    /// on `ChunkIO` and reports `chunkWritten`.
    func chunkArrived(id: String, index: Int, hash: [UInt8], from link: LinkHandle) -> Manifest? {
        let (arrival, effects) = core.chunkArrived(id: id, index: index, hash: hash, from: link.peer.id, now: now)
        switch arrival {
        case .corrupt:
            _ = counters.corruptChunks.wrappingAdd(1, ordering: .relaxed)
            log.warning("chunk \(index) of \(id) from \(link.peer.id) failed its hash; asking another holder")
        case .write, .dropped: _ = counters.chunksVerified.wrappingAdd(1, ordering: .relaxed)
        case .unknown: break
        }
        execute(effects)
        if case let .write(manifest) = arrival { return manifest }
        return nil
    }

    /// The write `chunkArrived` asked for finished (`error`: it failed, and why).
    func chunkWritten(id: String, index: Int, from peer: MemberID, error: String?) {
        let (stored, effects) = core.chunkWritten(id: id, index: index, from: peer, failed: error != nil, now: now)
        if let error { log.warning("cannot store chunk \(index) of \(id): \(error)") }
        if stored { _ = counters.chunksFetched.wrappingAdd(1, ordering: .relaxed) }
        execute(effects)
    }

    // MARK: leaving

    /// A graceful leave's hand-off, as the shared shell runs it (`SessionShell+Leave`): pushes
    /// every chunk no other live member holds to a live member, and waits (bounded) until the
    /// receivers' `have`s show them. Returns how many chunks were handed off.
    func handOff(_ cause: LeaveCause) async -> Int {
        shell.beginLeave(cause)
        let store = self.store
        while let (peer, id, index) = shell.nextHandOff() {
            // Read off the actor, one chunk at a time (never the whole plan in memory).
            guard let manifest = attachments[id]?.manifest,
                  let sealed = (try? await ChunkIO.run { store.read(manifest, index) }) ?? nil, let link = links[peer] else {
                shell.handOffFailed(id: id, index: index)
                continue
            }
            link.sendChunk(id: id, index: index, body: sealed)
        }
        while case let .waiting(until) = shell.handOffProgress(), mayWait {
            await wait(for: .handOff, until: instant(at: until))
        }
        guard case let .done(handedOff) = shell.handOffProgress() else { return shell.handedOffSoFar() }
        return handedOff
    }

    // MARK: JSON

    func attachmentJSON(_ id: String) -> JSON {
        guard let a = attachments[id] else { return .null }
        let have = journal.swarm.have(id)?.setCount ?? 0
        let meta = (try? JSON.parse(a.manifest.meta)) ?? .null
        return .object([
            "id": .string(id),
            "name": .string(a.manifest.name),
            "size": .int(Int64(a.manifest.size)),
            "meta": meta,
            "from": .string(a.manifest.uploader.description),
            "chunk_size": .int(Int64(a.manifest.chunkSize)),
            "chunks": .int(Int64(a.manifest.chunkCount)),
            "have": .int(Int64(have)),
            "complete": .bool(!a.removed && (journal.swarm.have(id)?.isFull ?? false)),
            "holders": .array(journal.swarm.completeHolders(id).map { .string($0.description) }),
            "state": .string(journal.state(of: id, now: now).rawValue),
        ])
    }

    func emitAttachment(_ change: String, _ id: String) {
        events.append("attachment", topic: .attachments, ["change": .string(change), "attachment": attachmentJSON(id)])
    }
}
