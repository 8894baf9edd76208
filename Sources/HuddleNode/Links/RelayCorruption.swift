import Foundation

/// A **test-only** knob, like `WallClock`'s: with `HUDDLE_TEST_RELAY_CORRUPT_AFTER=N` in its
/// environment, a node relaying circuits flips one byte of the first circuit bytes it forwards
/// once it has forwarded N bytes in all — once per run — as a hostile relay would, so that a test
/// can show the two ends of a circuit detect it (their link fails its AEAD and forms again).
/// Not an option of `huddle run`; nothing else reads it.
struct RelayCorruption: Sendable {
    static let variable = "HUDDLE_TEST_RELAY_CORRUPT_AFTER"
    private var after: Int?
    private var forwarded = 0
    /// How many times a byte was flipped (0 or 1).
    private(set) var flipped = 0

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        after = environment[Self.variable].flatMap { Int($0) }.map { max(0, $0) }
    }

    /// `n` more bytes are being forwarded.
    mutating func count(_ n: Int) { forwarded = forwarded &+ n }

    /// `bytes`, or (once, past the threshold) with its middle byte flipped.
    mutating func apply(_ bytes: [UInt8]) -> [UInt8] {
        guard let after, flipped == 0, forwarded >= after, !bytes.isEmpty else { return bytes }
        flipped = 1
        var copy = bytes
        copy[copy.count / 2] ^= 0x5A
        return copy
    }
}
