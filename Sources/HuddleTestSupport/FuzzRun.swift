import HuddleCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One fuzz test's run: how many inputs (`HUDDLE_FUZZ_COUNT` — `make fuzz` sets 1,000,000 — else the
/// test's own default, small enough for `make test`), a seed (`HUDDLE_FUZZ_SEED`, else fresh, printed before the first input), a generator
/// per input derived from (seed, index) so any input is replayed from the two numbers alone, and a
/// file each input is written to before it is fed (`HUDDLE_FUZZ_LAST_INPUT`, else under /tmp): a
/// trap ends the process, and the file then names the seed and index and holds the bytes.
///
/// Guarantees: the same seed and index make the same input; the file is removed when the run ends
/// without a trap. Immutable after `init` (the descriptor is written with `pwrite` at offset 0), so
/// it is `Sendable`.
public final class FuzzRun: Sendable {
    public let name: String
    public let count: Int
    public let seed: UInt64
    private let path: String
    private let fd: Int32

    public init(_ name: String, defaultCount: Int = 20_000) {
        let env = { (key: String) in getenv(key).map { String(cString: $0) } }
        self.name = name
        count = max(1, env("HUDDLE_FUZZ_COUNT").flatMap { Int($0) } ?? defaultCount)
        seed = env("HUDDLE_FUZZ_SEED").flatMap { UInt64($0) } ?? UInt64.random(in: 0 ... .max)
        path = (env("HUDDLE_FUZZ_LAST_INPUT") ?? "/tmp/huddle-fuzz-last-input.\(getpid())") + ".\(name)"
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        print("fuzz \(name): \(count) inputs, seed \(seed) (replay: HUDDLE_FUZZ_SEED=\(seed)); each input is written to \(path) before it is fed")
    }

    deinit {
        if fd >= 0 { close(fd); unlink(path) }
    }

    /// The generator of input `index`.
    public func random(_ index: Int) -> FuzzRandom { FuzzRandom(seed: seed ^ (UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15)) }

    /// Writes input `index` (its seed and index on the first line, then its bytes) before it is fed.
    public func record(_ index: Int, _ bytes: [UInt8]) {
        guard fd >= 0 else { return }
        let data = Array("\(name) seed \(seed) index \(index)\n".utf8) + bytes
        _ = data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        _ = ftruncate(fd, off_t(data.count))
    }
}

/// The fuzz runs' generator: the protocol's own seeded SplitMix64 (`SWIMRandom`), with the helpers
/// fuzz inputs are made with.
public typealias FuzzRandom = SWIMRandom

extension SWIMRandom {
    /// `count` random bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0 ... .max, using: &self) } }

    /// `bytes` damaged one way: a bit flipped, cut short, a random tail, a byte set to an extreme,
    /// replaced by random bytes, or (one time in seven) left as they are.
    public mutating func damage(_ bytes: [UInt8]) -> [UInt8] {
        var b = bytes
        let at = b.isEmpty ? 0 : Int.random(in: 0..<b.count, using: &self)
        switch Int.random(in: 0..<7, using: &self) {
        case 0: if !b.isEmpty { b[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &self) }
        case 1: b = Array(b.prefix(at))
        case 2: b += self.bytes(Int.random(in: 1...64, using: &self))
        case 3: if !b.isEmpty { b[at] = [0, 1, 0x7f, 0x80, 0xff].randomElement(using: &self) ?? 0 }
        case 4: b = self.bytes(Int.random(in: 0...(bytes.count + 16), using: &self))
        case 5: if !b.isEmpty { b.insert(contentsOf: self.bytes(Int.random(in: 1...8, using: &self)), at: at) }
        default: break
        }
        return b
    }
}
