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

    func write(_ id: String, _ index: Int, _ bytes: [UInt8]) throws {
        try FileManager.default.createDirectory(atPath: directory(id), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let final = path(id, index)
        let temporary = final + ".part"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(bytes), attributes: [.posixPermissions: 0o600]) else {
            throw NodeError("cannot write chunk file \(temporary)")
        }
        guard Foundation.rename(temporary, final) == 0 else { throw NodeError("cannot rename chunk file \(temporary)") }
    }

    func read(_ id: String, _ index: Int) -> [UInt8]? {
        FileManager.default.contents(atPath: path(id, index)).map { Array($0) }
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
