import Foundation

/// Reads and writes the one-line secret files of Huddle (`<header> v1 <base64>\n`), mode 0600.
/// Loading refuses files that group or others can read, like ssh does, and anything that is not a
/// small regular file owned by this user (a link, a FIFO, another user's file); each in one line.
enum KeyFile {
    static func write(_ secret: [UInt8], header: String, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST { throw CryptoError("\(path) already exists; refusing to overwrite it") }
            throw CryptoError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let line = Array("\(header) v1 \(Data(secret).base64EncodedString())\n".utf8)
        let written = line.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
        guard written == line.count, fsync(fd) == 0 else {
            throw CryptoError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Largest secret file read: a header, a version and 88 base64 characters fit in far less.
    static let maximumFileBytes = 4096

    /// Reads a secret file without trusting its path: opened with `O_NOFOLLOW` (a symbolic link is
    /// refused) and `O_NONBLOCK` (a FIFO cannot hang the open), then checked on the descriptor — a
    /// regular file, owned by this process's user, no group or other bits, at most 4 KiB — and read
    /// from that same descriptor, so what was checked is what is read.
    static func read(_ path: String, header: String, length: Int, what: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ELOOP { throw CryptoError("\(what) \(path) is a symbolic link; give the path of the file itself") }
            throw CryptoError("cannot read \(what) \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw CryptoError("cannot read \(what) \(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw CryptoError("\(what) \(path) is not a regular file") }
        guard info.st_uid == geteuid() else {
            throw CryptoError("\(what) \(path) is owned by uid \(info.st_uid), not by this user (uid \(geteuid())); run: chown \(geteuid()) \(path)")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw CryptoError("\(what) \(path) is readable by group or others (mode \(String(mode, radix: 8, uppercase: false).leftPadded(to: 4))); run: chmod 600 \(path)")
        }
        guard info.st_size <= maximumFileBytes else {
            throw CryptoError("\(what) \(path) is \(info.st_size) bytes; a \(what) is one short line (at most \(maximumFileBytes) bytes)")
        }
        var data = [UInt8](repeating: 0, count: maximumFileBytes + 1)
        var count = 0
        while count < data.count {
            let n = data.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw CryptoError("cannot read \(what) \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            count += n
        }
        guard count <= maximumFileBytes else { throw CryptoError("\(what) \(path) grew past \(maximumFileBytes) bytes while being read") }
        let text = String(decoding: data[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3, parts[0] == header else {
            throw CryptoError("\(what) \(path) is malformed: expected one line \"\(header) v1 <base64>\"")
        }
        guard parts[1] == "v1" else { throw CryptoError("\(what) \(path) has unsupported version \(parts[1]) (this huddle reads v1)") }
        guard let bytes = Data(base64Encoded: String(parts[2])) else { throw CryptoError("\(what) \(path) is malformed: its key is not base64") }
        guard bytes.count == length else {
            throw CryptoError("\(what) \(path) is malformed: its key is \(bytes.count) bytes, expected \(length)")
        }
        return Array(bytes)
    }
}

extension String {
    func leftPadded(to n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}
