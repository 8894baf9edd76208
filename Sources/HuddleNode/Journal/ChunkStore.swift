import Foundation
import HuddleCore
import HuddleCrypto
import NIOCore
import Synchronization

/// Encrypted chunks on disk: one file per attachment, `<data dir>/chunks/<attachment>`, with chunk
/// `index` at `index × (chunk size + tag)` (a sparse file until every chunk is in). Its byte limit is
/// the session core's (`Journal.storeFits`), not the store's.
/// One file instead of one per chunk: creating hundreds of inodes per attachment cost more CPU in
/// ext4's inode allocator than hashing the chunks. A chunk counts as held only once its write has
/// returned, so a reader never reads a slot that is half written. Sendable: it holds only
/// immutable paths.
struct ChunkStore: Sendable {
    let root: String

    init(dataDirectory: String) throws {
        root = dataDirectory + "/chunks"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    func path(_ id: String) -> String { "\(root)/\(id)" }

    /// Writes one sealed chunk at its place in the attachment's file, with plain system calls.
    func write(_ id: String, at offset: Int, _ bytes: [UInt8]) throws {
        IOThreads.check("a chunk write")
        let file = path(id)
        let fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw NodeError("cannot write chunk file \(file): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard bytes.withUnsafeBytes({ writeAll(fd, $0, at: offset) }) else {
            throw NodeError("cannot write chunk file \(file): \(String(cString: strerror(errno)))")
        }
    }

    /// `length` bytes at `offset` of the attachment's file; nil when they are missing or unreadable.
    func read(_ id: String, at offset: Int, length: Int) -> [UInt8]? {
        IOThreads.check("a chunk read")
        let fd = open(path(id), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return Self.readExactly(fd, at: offset, length: length)
    }

    /// Chunk `index` of `manifest`'s attachment, as stored (sealed).
    func read(_ manifest: Manifest, _ index: Int) -> [UInt8]? {
        let place = Self.place(of: index, in: manifest)
        return read(manifest.id, at: place.offset, length: place.length)
    }

    /// Stores sealed chunk `index` of `manifest`'s attachment, given as the frames it arrived in
    /// (written one after another, never copied into one array first).
    func write(_ manifest: Manifest, _ index: Int, parts: [ByteBuffer]) throws {
        IOThreads.check("a received chunk's write")
        let file = path(manifest.id)
        let fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw NodeError("cannot write chunk file \(file): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var offset = Self.place(of: index, in: manifest).offset
        for part in parts {
            guard part.withUnsafeReadableBytes({ writeAll(fd, $0, at: offset) }) else {
                throw NodeError("cannot write chunk file \(file): \(String(cString: strerror(errno)))")
            }
            offset += part.readableBytes
        }
    }

    /// Where sealed chunk `index` of `manifest`'s attachment lies in its file.
    static func place(of index: Int, in manifest: Manifest) -> (offset: Int, length: Int) {
        place(of: index, chunkSize: Int(manifest.chunkSize), plainLength: manifest.plainLength(of: index))
    }

    /// The same, before a manifest exists (while a file is imported).
    static func place(of index: Int, chunkSize: Int, plainLength: Int) -> (offset: Int, length: Int) {
        (index * (chunkSize + AEAD.tagLength), plainLength + AEAD.tagLength)
    }

    /// Gives an imported attachment its real id (known once every chunk is hashed).
    func rename(_ from: String, to id: String) throws {
        IOThreads.check("renaming an imported chunk file")
        guard Foundation.rename(path(from), path(id)) == 0 else { throw NodeError("cannot move imported chunks to \(path(id))") }
    }

    func remove(_ id: String) {
        IOThreads.check("deleting a chunk file")
        unlink(path(id))
    }

    /// The names of the files in the store (attachment ids, or an import's staging name).
    func fileNames() -> [String] {
        IOThreads.check("listing the chunk store")
        return (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
    }

    /// Whether the store has a file for attachment `id`.
    func hasFile(_ id: String) -> Bool {
        IOThreads.check("looking for a chunk file")
        return access(path(id), F_OK) == 0
    }

    func removeAll() { try? FileManager.default.removeItem(atPath: root) }

    /// Bytes the chunk files take on disk (allocated blocks: the files are sparse until complete).
    func usedBytes() -> Int {
        let names = fileNames()
        var total = 0
        for name in names {
            var info = stat()
            if stat("\(root)/\(name)", &info) == 0 { total += Int(info.st_blocks) * 512 }
        }
        return total
    }

    /// Encrypts a file chunk by chunk into the store (never holding it whole) and returns its
    /// unsigned manifest fields and the new attachment key. `workers` threads (this one and
    /// `workers - 1` more, at this thread's nice value) each seal, store and hash every
    /// `workers`-th chunk: sealing and hashing 100 MiB takes ~0.2 s of one core, and every member
    /// waits for it before the first chunk can go out. The file's size is taken once at the start;
    /// a file that shrinks meanwhile fails the import.
    func importFile(path: String, chunkSize: Int, storeAs id: String, workers: Int = 1) throws -> (hashes: [[UInt8]], size: UInt64, key: [UInt8]) {
        IOThreads.check("an attachment's import")
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw NodeError("cannot read \(path)") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size >= 0 else { throw NodeError("cannot read \(path)") }
        let size = Int(info.st_size)
        let count = (size + chunkSize - 1) / chunkSize
        let key = SecureRandom.bytes(32)
        let hashes = Mutex([[UInt8]](repeating: [], count: count))
        let failure = Mutex<NodeError?>(nil)
        let work: @Sendable (Int, Int) -> Void = { worker, of in
            for index in stride(from: worker, to: count, by: of) {
                let length = min(chunkSize, size - index * chunkSize)
                do {
                    guard let plain = Self.readExactly(fd, at: index * chunkSize, length: length) else {
                        throw NodeError("\(path) changed while it was read")
                    }
                    let sealed = ChunkCipher.seal(plain, index: index, key: key)
                    try write(id, at: Self.place(of: index, chunkSize: chunkSize, plainLength: length).offset, sealed)
                    let hash = ChunkCipher.hash(sealed)
                    hashes.withLock { $0[index] = hash }
                } catch {
                    failure.withLock { $0 = $0 ?? (error as? NodeError ?? NodeError("\(error)")) }
                    return
                }
                if failure.withLock({ $0 != nil }) { return }
            }
        }
        let helpers = max(1, min(workers, count)) - 1
        let niceness = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        let done = DispatchSemaphore(value: 0)
        for helper in 0..<helpers {
            let thread = Thread {
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness)
                IOThreads.run { work(helper + 1, helpers + 1) }
                done.signal()
            }
            thread.start()
        }
        work(0, helpers + 1)
        for _ in 0..<helpers { done.wait() }
        if let error = failure.withLock({ $0 }) { throw error }
        return (hashes.withLock { $0 }, UInt64(size), key)
    }

    /// `length` bytes of `fd` at `offset`; nil when fewer are there or the read fails.
    private static func readExactly(_ fd: Int32, at offset: Int, length: Int) -> [UInt8]? {
        var complete = false
        let bytes = [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            var done = 0
            while done < length {
                let n = pread(fd, buffer.baseAddress! + done, length - done, off_t(offset + done))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                done += n
            }
            count = done
            complete = done == length
        }
        return complete ? bytes : nil
    }
}

/// Writes all of `bytes` to `fd` (at `offset`, when given, else at its position), retrying short
/// writes and EINTR; false on any other error.
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int? = nil) -> Bool {
    var done = 0
    while done < bytes.count {
        let n = offset.map { pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t($0 + done)) }
            ?? Foundation.write(fd, bytes.baseAddress! + done, bytes.count - done)
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return false }
        done += n
    }
    return true
}
