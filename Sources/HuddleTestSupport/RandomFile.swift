import Foundation

/// A file the tests could not write (`writeRandomFile`).
public struct TestFileError: Error, CustomStringConvertible {
    public let path: String
    public var description: String { "cannot create \(path)" }
}

/// Writes `count` pseudo-random bytes to `path`, the same bytes for the same `seed` (a SplitMix
/// sequence, little-endian words), a mebibyte at a time: what attachments in the tests are made
/// of. A word per store, not a byte or a system call per word (`SystemRandomNumberGenerator`
/// makes a `getrandom` call per 8 bytes, and cost the host tests seconds of CPU per run).
public func writeRandomFile(_ path: String, count: Int, seed: UInt64) throws {
    _ = FileManager.default.createFile(atPath: path, contents: nil)
    guard let out = FileHandle(forWritingAtPath: path) else { throw TestFileError(path: path) }
    defer { try? out.close() }
    var state = seed
    var written = 0
    var block = [UInt8](repeating: 0, count: min(1 << 20, max(0, count)))
    while written < count {
        let n = min(block.count, count - written)
        block.withUnsafeMutableBytes { raw in
            var i = 0
            while i < n {
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z ^= z >> 27
                if n - i >= 8 {
                    raw.storeBytes(of: z.littleEndian, toByteOffset: i, as: UInt64.self)
                } else {
                    for j in 0..<(n - i) { raw[i + j] = UInt8(truncatingIfNeeded: z >> (8 * UInt64(j))) }
                }
                i += 8
            }
        }
        try out.write(contentsOf: block[0..<n])
        written += n
    }
}
