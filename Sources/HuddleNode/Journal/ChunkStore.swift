import Foundation
import HuddleCore
import HuddleCrypto

/// Encrypted chunks on disk: one file per attachment, `<data dir>/chunks/<attachment>`, with chunk
/// `index` at `index × (chunk size + tag)` (a sparse file until every chunk is in), and a byte limit.
/// One file instead of one per chunk: creating hundreds of inodes per attachment cost more CPU in
/// ext4's inode allocator than hashing the chunks. A chunk counts as held only once its write has
/// returned, so a reader never reads a slot that is half written. Sendable: it holds only
/// immutable paths and limits.
struct ChunkStore: Sendable {
    let root: String
    let limitBytes: Int

    init(dataDirectory: String, limitBytes: Int) throws {
        root = dataDirectory + "/chunks"
        self.limitBytes = limitBytes
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    func path(_ id: String) -> String { "\(root)/\(id)" }

    /// Writes one sealed chunk at its place in the attachment's file, with plain system calls.
    func write(_ id: String, at offset: Int, _ bytes: [UInt8]) throws {
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
        let fd = open(path(id), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
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

    /// Chunk `index` of `manifest`'s attachment, as stored (sealed).
    func read(_ manifest: Manifest, _ index: Int) -> [UInt8]? {
        let place = Self.place(of: index, in: manifest)
        return read(manifest.id, at: place.offset, length: place.length)
    }

    /// Stores sealed chunk `index` of `manifest`'s attachment.
    func write(_ manifest: Manifest, _ index: Int, _ sealed: [UInt8]) throws {
        try write(manifest.id, at: Self.place(of: index, in: manifest).offset, sealed)
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
        guard Foundation.rename(path(from), path(id)) == 0 else { throw NodeError("cannot move imported chunks to \(path(id))") }
    }

    func remove(_ id: String) { unlink(path(id)) }

    func removeAll() { try? FileManager.default.removeItem(atPath: root) }

    /// Bytes the chunk files take on disk (allocated blocks: the files are sparse until complete).
    func usedBytes() -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        var total = 0
        for name in names {
            var info = stat()
            if stat("\(root)/\(name)", &info) == 0 { total += Int(info.st_blocks) * 512 }
        }
        return total
    }

    /// Encrypts a file chunk by chunk into the store (never holding it whole) and returns its
    /// unsigned manifest fields and the new attachment key.
    func importFile(path: String, chunkSize: Int, storeAs id: String) throws -> (hashes: [[UInt8]], size: UInt64, key: [UInt8]) {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw NodeError("cannot read \(path)") }
        defer { try? handle.close() }
        let key = SecureRandom.bytes(32)
        var hashes: [[UInt8]] = []
        var size: UInt64 = 0
        while true {
            let data = try handle.read(upToCount: chunkSize) ?? Data()
            if data.isEmpty { break }
            let sealed = ChunkCipher.seal(Array(data), index: hashes.count, key: key)
            try write(id, at: Self.place(of: hashes.count, chunkSize: chunkSize, plainLength: data.count).offset, sealed)
            hashes.append(ChunkCipher.hash(sealed))
            size += UInt64(data.count)
            if data.count < chunkSize { break }
        }
        return (hashes, size, key)
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
