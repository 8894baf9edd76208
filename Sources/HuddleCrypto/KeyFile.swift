import Foundation

/// Reads and writes the one-line secret files of Huddle (`<header> <version> <fields…>\n`, e.g.
/// `<header> v1 <base64>`), mode 0600. Loading refuses files that group or others can read, like
/// ssh does, and anything that is not a small regular file owned by this user (a link, a FIFO,
/// another user's file); each in one line. `replace` rewrites a file atomically: a reader (or a
/// crash) sees the old line or the new one, never a mix or nothing.
enum KeyFile {
    static func write(_ secret: [UInt8], header: String, to path: String) throws {
        try create(line: "\(header) v1 \(Data(secret).base64EncodedString())\n", at: path)
    }

    /// Writes `line` as a new file (mode 0600); refuses to overwrite an existing file.
    static func create(line: String, at path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST { throw CryptoError("\(path) already exists; refusing to overwrite it") }
            throw CryptoError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        guard writeAll(fd, Array(line.utf8)), fsync(fd) == 0 else {
            throw CryptoError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Replaces the file at `path` by `line`, atomically: the line goes to a new temporary file in the
    /// same directory (created with `O_EXCL | O_NOFOLLOW`, mode exactly 0600), is `fsync`ed, renamed
    /// over `path`, and the directory is `fsync`ed so the rename survives a crash. `path` must be a
    /// file `read` accepts (regular, ours, mode 0600, the same `header`): a path that would not load
    /// is never replaced. On any failure the old file stays and the temporary file is removed.
    static func replace(_ path: String, line: String, header: String, what: String) throws {
        _ = try readFields(path, header: header, what: what)
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let base = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = "\(directory == "/" ? "" : directory)/.\(base).\(getpid()).\(hexString(SecureRandom.bytes(6))).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CryptoError("cannot create \(temporary) to rewrite \(path): \(String(cString: strerror(errno)))") }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        let written = fchmod(fd, 0o600) == 0 && writeAll(fd, Array(line.utf8)) && fsync(fd) == 0
        let failure = String(cString: strerror(errno))
        close(fd)
        guard written else { throw CryptoError("cannot write \(temporary) to rewrite \(path): \(failure)") }
        guard rename(temporary, path) == 0 else { throw CryptoError("cannot rename \(temporary) to \(path): \(String(cString: strerror(errno)))") }
        renamed = true
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else { throw CryptoError("rewrote \(path) but cannot open \(directory) to sync it: \(String(cString: strerror(errno)))") }
        defer { close(directoryFD) }
        guard fsync(directoryFD) == 0 else { throw CryptoError("rewrote \(path) but cannot sync \(directory): \(String(cString: strerror(errno)))") }
    }

    /// Writes every byte of `bytes` to `fd`, retrying short writes and `EINTR`.
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            done += n
        }
        return true
    }

    /// Largest secret file read: a header, a version and 88 base64 characters fit in far less.
    static let maximumFileBytes = 4096

    /// Reads a `v1` secret file (`<header> v1 <base64>`) and returns its secret of `length` bytes.
    static func read(_ path: String, header: String, length: Int, what: String) throws -> [UInt8] {
        let (version, fields) = try readFields(path, header: header, what: what)
        guard version == "v1" || fields.count != 1 else {
            throw CryptoError("\(what) \(path) has unsupported version \(version) (this huddle reads v1)")
        }
        guard fields.count == 1 else {
            throw CryptoError("\(what) \(path) is malformed: expected one line \"\(header) v1 <base64>\"")
        }
        return try secret(fields[0], length: length, what: what, path: path)
    }

    /// Decodes a base64 secret field of exactly `length` bytes.
    static func secret(_ field: String, length: Int, what: String, path: String) throws -> [UInt8] {
        guard let bytes = Data(base64Encoded: field) else { throw CryptoError("\(what) \(path) is malformed: its key is not base64") }
        guard bytes.count == length else {
            throw CryptoError("\(what) \(path) is malformed: its key is \(bytes.count) bytes, expected \(length)")
        }
        return Array(bytes)
    }

    /// Reads a secret file without trusting its path: opened with `O_NOFOLLOW` (a symbolic link is
    /// refused) and `O_NONBLOCK` (a FIFO cannot hang the open), then checked on the descriptor — a
    /// regular file, owned by this process's user, no group or other bits, at most 4 KiB — and read
    /// from that same descriptor, so what was checked is what is read. Returns the version word and
    /// the fields after it (at least one), the header checked.
    static func readFields(_ path: String, header: String, what: String) throws -> (version: String, fields: [String]) {
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
        let parts = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard parts.count >= 3, parts[0] == header else {
            throw CryptoError("\(what) \(path) is malformed: expected one line \"\(header) v1 <base64>\"")
        }
        return (parts[1], Array(parts[2...]))
    }
}

extension String {
    func leftPadded(to n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}
