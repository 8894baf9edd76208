import Foundation

/// Files HuddleKit hands to its node (an attachment to add, a place to load one into): each in a
/// directory of its own made by `mkdtemp` (mode 0700), and a file to add created with
/// `open(O_CREAT|O_EXCL|O_NOFOLLOW, 0600)`, so no other user ever reads the plaintext, not even
/// between its creation and a later chmod, and nothing planted at the path is followed or reused.
///
/// Guarantees: `remove()` deletes the file and the directory; errors are `.ioError` with the path.
struct PrivateDirectory: Sendable {
    let path: String

    /// A new directory under the temporary directory, readable by this user only.
    init() throws(HuddleKitError) {
        let base = FileManager.default.temporaryDirectory.path
        var template = Array("\(base)/huddlekit-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw .ioError("cannot make a private directory in \(base): \(String(cString: strerror(errno)))") }
        path = String(cString: made)
    }

    /// The path of `name` inside the directory.
    func file(_ name: String) -> String { "\(path)/\(name)" }

    /// Writes `data` to a new file `name` (created 0600; fails if anything is at the path).
    func write(_ data: Data, to name: String) throws(HuddleKitError) -> String {
        let target = file(name)
        let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .ioError("cannot create \(target): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var failure: Int32 = 0
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += n
            }
        }
        guard failure == 0 else { throw .ioError("cannot write \(target): \(String(cString: strerror(failure)))") }
        return target
    }

    /// Deletes the directory and what is in it.
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}
