import Foundation
import HuddleCore
import HuddleCrypto

/// Encrypted chunks on disk, one file per chunk under `<data dir>/chunks/<attachment>/<index>`,
/// with a byte limit. Files are written whole (temporary name, then rename), so a reader never
/// sees half a chunk. Sendable: it holds only immutable paths and limits.
struct ChunkStore: Sendable {
    let root: String
    let limitBytes: Int

    init(dataDirectory: String, limitBytes: Int) throws {
        root = dataDirectory + "/chunks"
        self.limitBytes = limitBytes
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    private func directory(_ id: String) -> String { "\(root)/\(id)" }
    func path(_ id: String, _ index: Int) -> String { "\(root)/\(id)/\(index)" }

    /// Writes one chunk file with plain system calls: no intermediate copies, and no second
    /// temporary file (the `.part` name and the rename already make the write atomic).
    func write(_ id: String, _ index: Int, _ bytes: [UInt8]) throws {
        if mkdir(directory(id), 0o700) != 0 && errno != EEXIST {
            throw NodeError("cannot create chunk directory \(directory(id)): \(String(cString: strerror(errno)))")
        }
        let final = path(id, index)
        let temporary = final + ".part"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw NodeError("cannot write chunk file \(temporary): \(String(cString: strerror(errno)))") }
        let written = bytes.withUnsafeBytes { writeAll(fd, $0) }
        close(fd)
        guard written else {
            unlink(temporary)
            throw NodeError("cannot write chunk file \(temporary): \(String(cString: strerror(errno)))")
        }
        guard Foundation.rename(temporary, final) == 0 else { throw NodeError("cannot rename chunk file \(temporary)") }
    }

    /// The chunk file's bytes, read straight into one array; nil when it is missing or unreadable.
    func read(_ id: String, _ index: Int) -> [UInt8]? {
        let fd = open(path(id, index), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size >= 0, info.st_size <= Int(Int32.max) else { return nil }
        let size = Int(info.st_size)
        var complete = false
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var done = 0
            while done < size {
                let n = Foundation.read(fd, buffer.baseAddress! + done, size - done)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                done += n
            }
            count = done
            complete = done == size
        }
        return complete ? bytes : nil
    }

    /// Gives an imported attachment its real id (known once every chunk is hashed).
    func rename(_ from: String, to id: String) throws {
        remove(id)
        guard Foundation.rename(directory(from), directory(id)) == 0 else { throw NodeError("cannot move imported chunks to \(directory(id))") }
    }

    func remove(_ id: String) { try? FileManager.default.removeItem(atPath: directory(id)) }

    func removeAll() { try? FileManager.default.removeItem(atPath: root) }

    /// Bytes of chunk files on disk.
    func usedBytes() -> Int {
        guard let walker = FileManager.default.enumerator(atPath: root) else { return 0 }
        var total = 0
        while let name = walker.nextObject() as? String {
            total += (try? FileManager.default.attributesOfItem(atPath: "\(root)/\(name)")[.size] as? Int) ?? 0
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
            try write(id, hashes.count, sealed)
            hashes.append(ChunkCipher.hash(sealed))
            size += UInt64(data.count)
            if data.count < chunkSize { break }
        }
        return (hashes, size, key)
    }
}

/// Writes all of `bytes` to `fd`, retrying short writes and EINTR; false on any other error.
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
    var done = 0
    while done < bytes.count {
        let n = Foundation.write(fd, bytes.baseAddress! + done, bytes.count - done)
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return false }
        done += n
    }
    return true
}
