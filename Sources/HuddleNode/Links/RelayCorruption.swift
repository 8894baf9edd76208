import Foundation
import HuddleCore

/// A **test-only** knob, like `WallClock`'s: a node relaying circuits misbehaves as a hostile relay
/// would, so that a test can show the two ends of a circuit detect it and move on. With
/// `HUDDLE_TEST_RELAY_CORRUPT_AFTER=N` in its environment, once it has forwarded N circuit bytes in
/// all, it does what `HUDDLE_TEST_RELAY_MODE` says:
/// - `corrupt` (the default): flips one byte of the next circuit bytes it forwards, once per run
///   (the ends' link fails its AEAD and forms again);
/// - `drop`: from then on drops every other `circuitData` message it would forward, on every
///   circuit (a byte stream with holes: the ends' link fails its AEAD or framing);
/// - `stall`: from then on forwards no circuit bytes at all, keeping its circuits open (the ends
///   hear nothing over their link: `RelayRoutes`' stall rule closes it).
///
/// With `HUDDLE_TEST_RELAY_SCAN=TEXT` it counts how often TEXT (UTF-8) occurs in the circuit bytes
/// it forwards, across message boundaries (`sightings`): a test sends TEXT between the two ends and
/// expects 0, as the relay forwards only their link's ciphertext. Not options of `huddle run`;
/// nothing else reads them.
struct RelayCorruption: Sendable {
    static let variable = "HUDDLE_TEST_RELAY_CORRUPT_AFTER"
    static let modeVariable = "HUDDLE_TEST_RELAY_MODE"
    static let scanVariable = "HUDDLE_TEST_RELAY_SCAN"

    enum Mode: String, Sendable { case corrupt, drop, stall }

    private var after: Int?
    let mode: Mode
    private var forwarded = 0
    /// How many times a byte was flipped (0 or 1).
    private(set) var flipped = 0
    /// `circuitData` messages flipped, dropped or held in all.
    private(set) var tampered = 0
    private let marker: [UInt8]
    /// Per sending member, the last bytes it sent through here (a marker split across two messages).
    private var tails: [MemberID: [UInt8]] = [:]
    /// Times the scanned text was seen in forwarded bytes.
    private(set) var sightings = 0

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        after = environment[Self.variable].flatMap { Int($0) }.map { max(0, $0) }
        mode = environment[Self.modeVariable].flatMap(Mode.init(rawValue:)) ?? .corrupt
        marker = Array((environment[Self.scanVariable] ?? "").utf8)
    }

    /// `n` more bytes are being forwarded.
    mutating func count(_ n: Int) { forwarded = forwarded &+ n }

    /// `bytes` as this relay forwards them: as they are, changed (one byte flipped, once), or not at
    /// all (nil: dropped or held).
    mutating func apply(_ bytes: [UInt8]) -> [UInt8]? {
        guard let after, forwarded >= after, !bytes.isEmpty else { return bytes }
        switch mode {
        case .corrupt:
            guard flipped == 0 else { return bytes }
            flipped = 1
            tampered &+= 1
            var copy = bytes
            copy[copy.count / 2] ^= 0x5A
            return copy
        case .drop:
            tampered &+= 1
            return tampered % 2 == 1 ? nil : bytes
        case .stall:
            tampered &+= 1
            return nil
        }
    }

    /// Looks for the scanned text in `bytes` from `sender` (and the end of what it sent before).
    mutating func scan(_ bytes: [UInt8], from sender: MemberID) {
        guard !marker.isEmpty else { return }
        let window = (tails[sender] ?? []) + bytes
        sightings &+= Self.occurrences(of: marker, in: window)
        tails[sender] = Array(window.suffix(marker.count - 1))
    }

    /// Occurrences of `needle` in `haystack` (a window never counts one twice: its tail is shorter than `needle`).
    static func occurrences(of needle: [UInt8], in haystack: [UInt8]) -> Int {
        guard !needle.isEmpty, haystack.count >= needle.count else { return 0 }
        var n = 0
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<start + needle.count].elementsEqual(needle) { n += 1 }
        }
        return n
    }
}
