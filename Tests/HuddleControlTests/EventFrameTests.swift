import Foundation
@testable import HuddleControl
import Testing

/// The binary event frames (README, "Binary event frames"): a `message` frame turns into the very
/// JSON line CONTROL.md's `message` event has; hostile bytes never trap and are refused; a client
/// reads a reply line, then frames, however the bytes are cut.
@Suite struct EventFrameTests {
    private func frame(cursor: UInt64 = 7, seq: UInt64 = 5, reliable: Bool = true, deps: [(UInt64, UInt64)] = [(0xBB, 2), (0xCC, 9)],
                       to: [UInt64]? = nil, body: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        body.withUnsafeBufferPointer { MessageFrame.write(cursor: cursor, from: 0xAA, counter: 3, seq: seq, reliable: reliable, deps: deps, to: to, body: $0, into: &out) }
        return out
    }

    private func lines(_ frames: [UInt8]) -> String? {
        var out: [UInt8] = []
        guard frames.withUnsafeBytes({ EventFrame.appendLines(of: $0, into: &out) }) else { return nil }
        return String(decoding: out, as: UTF8.self)
    }

    /// The lines as the node wrote them before frames (MessageEvent at 0019641), byte for byte.
    @Test func aMessageFrameIsTheJSONLineByteForByte() {
        #expect(lines(frame(body: Array("hi \"there\"\n".utf8))) ==
            #"{"event":"message","cursor":7,"msg":"00000000000000aa-3","from":"00000000000000aa","seq":5,"deps":{"00000000000000bb":2,"00000000000000cc":9},"to":null,"reliable":true,"data":"aGkgInRoZXJlIgo=","text":"hi \"there\"\n"}"# + "\n")
        #expect(lines(frame(seq: 0, reliable: false, deps: [], to: [0xBB, 0x1], body: [0xFF, 0x00])) ==
            #"{"event":"message","cursor":7,"msg":"00000000000000aa-3","from":"00000000000000aa","seq":null,"deps":{},"to":["00000000000000bb","0000000000000001"],"reliable":false,"data":"/wA="}"# + "\n")
        #expect(lines(frame(to: [], body: [])) ==
            #"{"event":"message","cursor":7,"msg":"00000000000000aa-3","from":"00000000000000aa","seq":5,"deps":{"00000000000000bb":2,"00000000000000cc":9},"to":[],"reliable":true,"data":"","text":""}"# + "\n")
    }

    @Test func aJSONFrameIsItsLine() {
        let line = Array(#"{"event":"activity","cursor":1}"#.utf8) + [0x0A]
        #expect(lines(EventFrame.wrap(line: line)) == String(decoding: line, as: UTF8.self))
        #expect(lines(EventFrame.wrap(line: line) + frame(body: [1])) != nil, "runs of frames of both kinds")
    }

    /// Every cut of a frame, every byte flipped, and a body flagged UTF-8 that is not: refused or
    /// read within the bytes, never a trap, never invalid UTF-8 in the line.
    @Test func hostileFramesAreRefusedNeverATrap() {
        let whole = frame(to: [0xBB], body: Array("é".utf8))
        for cut in 0..<whole.count { #expect(lines(Array(whole[..<cut])) == nil || cut == 0, "a frame cut at \(cut)") }
        var generator = SystemRandomNumberGenerator()
        for i in 0..<whole.count {
            for _ in 0..<8 {
                var bad = whole
                bad[i] = UInt8.random(in: 0...255, using: &generator)
                // A `json` frame's line is passed on as it is (the node's own); a message frame's must parse.
                guard bad[4] == EventFrame.message, let text = lines(bad) else { continue }
                #expect((try? JSON.parse(Array(text.utf8.dropLast()))) != nil, "a line made from a damaged frame is still JSON: \(text)")
            }
        }
        var lying = frame(body: [0xC3])
        lying[EventFrame.headerBytes + 32] |= MessageFrame.utf8Flag
        #expect(lines(lying)?.contains(#""text""#) == false, "a body that is not UTF-8 gets no text, whatever the flag says")
        // Counts larger than the payload: refused.
        var deps = frame(body: [1, 2, 3])
        deps.replaceSubrange((EventFrame.headerBytes + 33)..<(EventFrame.headerBytes + 37), with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(lines(deps) == nil)
        for length in 0..<64 {
            let random = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = random.withUnsafeBytes { MessageFrame($0) }
            _ = lines(random)
        }
    }

    /// A client's reading: the reply line, then (once switched) frames, cut at every byte.
    @Test func aReplyLineThenFramesReadTheSameHoweverCut() throws {
        let reply = Array(#"{"id":1,"ok":true,"cursor":0,"encoding":"binary"}"#.utf8) + [0x0A]
        let event = EventFrame.wrap(line: Array(#"{"event":"activity","cursor":1}"#.utf8) + [0x0A])
        let message = frame(cursor: 2, body: Array("x".utf8))
        let stream = reply + event + message
        for cut in 0...stream.count {
            var reader = ReplyStream()
            var items: [ReplyStream.Item] = []
            for piece in [stream[..<cut], stream[cut...]] {
                reader.append(piece)
                while let item = try reader.next() {
                    if case .line = item, items.isEmpty { reader.framed = true }
                    items.append(item)
                }
            }
            #expect(items.count == 3, "cut at \(cut)")
            if case let .message(object)? = items.last {
                #expect(object["cursor"]?.intValue == 2 && object["text"]?.stringValue == "x")
            } else {
                Issue.record("the last item is the message (cut at \(cut))")
            }
        }
        var reader = ReplyStream()
        reader.framed = true
        reader.append([0, 0, 0, 0, 0])
        #expect(throws: ControlError.self) { _ = try reader.next() }
        reader = ReplyStream()
        reader.framed = true
        reader.append([0xFF, 0xFF, 0xFF, 0xFF, 1])
        #expect(throws: ControlError.self, "a frame over the limit is refused before it is buffered") { _ = try reader.next() }
    }
}
