import HuddleControl
import HuddleCore

/// A delivered message as the event log keeps it: a binary `message` frame (`MessageFrame`), its
/// body raw. This runs for every delivered message, once whatever the number of subscribers; the
/// JSON line (base64 and text) is made from the frame only for JSON-lines subscribers, once per
/// batch they share (`EventLog`).
enum MessageEvent {
    /// Appends the frame of `m`'s `message` event at `cursor`.
    static func writeFrame(_ m: WireMessage, reliable: Bool, cursor: Int64, into out: inout [UInt8]) {
        m.body.withUnsafeBufferPointer { body in
            MessageFrame.write(cursor: UInt64(clamping: cursor), from: m.origin.raw, counter: m.counter, seq: m.seq, reliable: reliable,
                               deps: m.deps.lazy.map { ($0.member.raw, $0.seq) }, to: m.to?.map(\.raw), body: body, into: &out)
        }
    }

    /// The JSON line of `m`'s `message` event at `cursor` (CONTROL.md), made from its frame.
    static func line(_ m: WireMessage, reliable: Bool, cursor: Int64) -> [UInt8] {
        var frame: [UInt8] = []
        writeFrame(m, reliable: reliable, cursor: cursor, into: &frame)
        var line: [UInt8] = []
        _ = frame.withUnsafeBytes { EventFrame.appendLines(of: $0, into: &line) }
        return line
    }
}
