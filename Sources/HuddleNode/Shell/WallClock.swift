import Foundation

/// The node's wall clock, in seconds since 1970: what its core reads for activity times and time
/// exchanges (`SessionCore.setWallClock`). The system's clock, plus `HUDDLE_TEST_CLOCK_OFFSET_MS`
/// when that is set: a **test-only** knob that makes one node read its clock ahead (or, negative,
/// behind) as a host whose clock is off would, so that the clock skew `huddle doctor` reports can be
/// tested with real processes on one machine. Not an option of `huddle run`; nothing else reads it.
struct WallClock: Sendable {
    static let testOffsetVariable = "HUDDLE_TEST_CLOCK_OFFSET_MS"
    /// Largest test offset taken (about 31 years, either way); a larger or unreadable one is ignored.
    static let maximumTestOffsetMs = 1e12

    /// Seconds added to the system's clock (0 but in tests).
    let offset: Double

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let text = environment[Self.testOffsetVariable], let ms = Double(text), ms.isFinite, abs(ms) <= Self.maximumTestOffsetMs {
            offset = ms / 1000
        } else {
            offset = 0
        }
    }

    func now() -> Double { Date().timeIntervalSince1970 + offset }
}
