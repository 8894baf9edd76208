import Foundation

/// Reads and writes the one-line secret files of Huddle (`<header> v1 <base64>\n`), mode 0600.
/// Loading refuses files that group or others can read, like ssh does, and says so in one line.
enum KeyFile {
    static func write(_ secret: [UInt8], header: String, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
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

    static func read(_ path: String, header: String, length: Int, what: String) throws -> [UInt8] {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw CryptoError("cannot read \(what) \(path): \(String(cString: strerror(errno)))")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw CryptoError("\(what) \(path) is readable by group or others (mode \(String(mode, radix: 8, uppercase: false).leftPadded(to: 4))); run: chmod 600 \(path)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CryptoError("cannot read \(what) \(path)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
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
