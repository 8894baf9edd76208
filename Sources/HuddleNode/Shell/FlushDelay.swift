import Foundation

/// `HUDDLE_TEST_FLUSH_DELAY_MS` is a **test-only** knob, like `NodeIO`'s: the scheduled flush of
/// this member's pending batch (`SessionShell.scheduleFlush`) waits that long first, so that a test
/// can fill a batch with one send after another (a full batch is flushed at once, when the next
/// message would not fit) and show what leaves in which order then. Not an option of `huddle
/// run`; nothing else reads it.
enum FlushDelay {
    static let variable = "HUDDLE_TEST_FLUSH_DELAY_MS"
    /// The delay (nil but in tests).
    static let value: Duration? = NodeIO.delay(ProcessInfo.processInfo.environment[variable])
}
