/// The binary event encoding (`subscribe {"encoding":"binary"}`, README "Binary event frames"), and
/// the form the node's event log keeps its events in.
///
/// A frame is a 4-byte big-endian `length` (the bytes after it, at least 1), a 1-byte `kind`, then
/// `length - 1` bytes of payload:
/// - kind 0, `json`: one JSON line exactly as JSON lines would carry it, its `\n` included (every
///   event but `message`, `overflow`, and the replies to later requests on the connection);
/// - kind 1, `message`: a `message` event (`MessageFrame`), its body as raw bytes.
///
/// Guarantees: `MessageFrame.writeLine` turns a message frame into the very bytes of the JSON line
/// CONTROL.md's `message` event has; `FrameReader` never traps on any input and never buffers a
/// frame longer than its limit.
public enum EventFrame {
    public static let json: UInt8 = 0
    public static let message: UInt8 = 1
    /// The length field and the kind byte.
    public static let headerBytes = 5

    /// Appends a `json` frame whose line `writeLine` appends (with its `\n`).
    public static func writeJSON(into out: inout [UInt8], _ writeLine: (inout [UInt8]) -> Void) {
        let start = out.count
        out.append(contentsOf: [0, 0, 0, 0, json])
        writeLine(&out)
        patchLength(&out, at: start)
    }

    /// A JSON line as a `json` frame.
    public static func wrap(line: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(line.count + headerBytes)
        writeJSON(into: &out) { $0.append(contentsOf: line) }
        return out
    }

    /// Sets the length field of the frame starting at `start` to the bytes after it up to `out`'s end.
    static func patchLength(_ out: inout [UInt8], at start: Int) {
        let length = UInt32(truncatingIfNeeded: out.count - start - 4)
        out[start] = UInt8(truncatingIfNeeded: length >> 24)
        out[start + 1] = UInt8(truncatingIfNeeded: length >> 16)
        out[start + 2] = UInt8(truncatingIfNeeded: length >> 8)
        out[start + 3] = UInt8(truncatingIfNeeded: length)
    }

    /// The whole length (header included) of the frame starting at `bytes[at]`, or nil when fewer
    /// than its header's bytes are there or its length field is 0.
    public static func frameLength(_ bytes: UnsafeRawBufferPointer, at: Int) -> Int? {
        guard at >= 0, bytes.count - at >= headerBytes else { return nil }
        let length = Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        return length >= 1 ? length + 4 : nil
    }

    /// Appends to `out` the JSON lines of the whole frames in `frames` (as the event log holds
    /// them); false when `frames` is not a run of well-formed frames (then `out` is as it was).
    public static func appendLines(of frames: UnsafeRawBufferPointer, into out: inout [UInt8]) -> Bool {
        let before = out.count
        var at = 0
        while at < frames.count {
            guard let length = frameLength(frames, at: at), length <= frames.count - at else { out.removeLast(out.count - before); return false }
            let payload = UnsafeRawBufferPointer(rebasing: frames[(at + headerBytes)..<(at + length)])
            switch frames[at + 4] {
            case json: out.append(contentsOf: payload)
            case message:
                guard let m = MessageFrame(payload) else { out.removeLast(out.count - before); return false }
                m.writeLine(into: &out)
            default: out.removeLast(out.count - before); return false
            }
            at += length
        }
        return true
    }
}

/// A `message` event as a binary frame's payload (kind 1), all integers big-endian:
/// `cursor` u64, `from` u64 (the member; its string is 16 lowercase hex digits), `counter` u64
/// (`msg` is `from`'s string, `-`, `counter` in decimal), `seq` u64 (0: null), `flags` u8 (bit 0
/// `reliable`, bit 1 `to` is a list (else null), bit 2 the body is valid UTF-8, so the JSON event
/// has `text`), `deps` count u32 then that many (member u64, seq u64), `to` count u32 then that
/// many members u64 (0 when `to` is null), then the body: every remaining byte.
///
/// A view over the payload's bytes (valid while they are); parsing checks every count against the
/// bytes there, so a short or hostile payload is refused (nil), never read past.
public struct MessageFrame {
    public let cursor: UInt64
    public let from: UInt64
    public let counter: UInt64
    public let seq: UInt64
    public let flags: UInt8
    public let depCount: Int
    public let toCount: Int
    private let deps: UnsafeRawBufferPointer
    private let targets: UnsafeRawBufferPointer
    public let body: UnsafeRawBufferPointer

    public static let reliableFlag: UInt8 = 1, toFlag: UInt8 = 2, utf8Flag: UInt8 = 4
    /// The bytes before the deps: cursor, from, counter, seq, flags, deps count.
    static let fixedBytes = 8 * 4 + 1 + 4

    public var reliable: Bool { flags & Self.reliableFlag != 0 }
    public var isUTF8: Bool { flags & Self.utf8Flag != 0 }
    /// Nil for a broadcast.
    public var to: [UInt64]? { flags & Self.toFlag == 0 ? nil : (0..<toCount).map { Self.u64(targets, $0 * 8) } }
    public func dep(_ i: Int) -> (member: UInt64, seq: UInt64) { (Self.u64(deps, i * 16), Self.u64(deps, i * 16 + 8)) }

    public init?(_ p: UnsafeRawBufferPointer) {
        guard p.count >= Self.fixedBytes + 4 else { return nil }
        cursor = Self.u64(p, 0); from = Self.u64(p, 8); counter = Self.u64(p, 16); seq = Self.u64(p, 24)
        flags = p[32]
        let depCount = Int(Self.u32(p, 33))
        var at = Self.fixedBytes
        guard depCount <= (p.count - at - 4) / 16 else { return nil }
        deps = UnsafeRawBufferPointer(rebasing: p[at..<(at + depCount * 16)])
        at += depCount * 16
        let toCount = Int(Self.u32(p, at))
        at += 4
        guard toCount <= (p.count - at) / 8, flags & Self.toFlag != 0 || toCount == 0 else { return nil }
        targets = UnsafeRawBufferPointer(rebasing: p[at..<(at + toCount * 8)])
        at += toCount * 8
        body = UnsafeRawBufferPointer(rebasing: p[at...])
        self.depCount = depCount
        self.toCount = toCount
    }

    /// Appends a whole message frame (header included); `deps` and `to` as (member, seq) pairs and members.
    public static func write(cursor: UInt64, from: UInt64, counter: UInt64, seq: UInt64, reliable: Bool,
                             deps: some Collection<(UInt64, UInt64)>, to: [UInt64]?,
                             body: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        let start = out.count
        out.reserveForAppending(EventFrame.headerBytes + fixedBytes + 4 + deps.count * 16 + (to?.count ?? 0) * 8 + body.count)
        out.append(contentsOf: [0, 0, 0, 0, EventFrame.message])
        for v in [cursor, from, counter, seq] { put(v, &out) }
        out.append((reliable ? reliableFlag : 0) | (to == nil ? 0 : toFlag) | (isValidUTF8(body) ? utf8Flag : 0))
        put32(UInt32(clamping: deps.count), &out)
        for (member, s) in deps.prefix(Int(UInt32.max)) { put(member, &out); put(s, &out) }
        put32(UInt32(clamping: to?.count ?? 0), &out)
        for member in (to ?? []).prefix(Int(UInt32.max)) { put(member, &out) }
        out.append(contentsOf: body)
        EventFrame.patchLength(&out, at: start)
    }

    /// Appends the JSON line of this `message` event (CONTROL.md): the very bytes JSON lines carry.
    public func writeLine(into out: inout [UInt8]) {
        out.reserveForAppending(200 + body.count * 7 / 3 + depCount * 40)
        out.append(contentsOf: #"{"event":"message","cursor":"#.utf8)
        JSON.writeDecimal(cursor, into: &out)
        out.append(contentsOf: #","msg":""#.utf8)
        JSON.writeHex16(from, into: &out)
        out.append(UInt8(ascii: "-"))
        JSON.writeDecimal(counter, into: &out)
        out.append(contentsOf: #"","from":""#.utf8)
        JSON.writeHex16(from, into: &out)
        out.append(contentsOf: #"","seq":"#.utf8)
        if seq == 0 { out.append(contentsOf: "null".utf8) } else { JSON.writeDecimal(seq, into: &out) }
        out.append(contentsOf: #","deps":{"#.utf8)
        for i in 0..<depCount {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            let (member, s) = dep(i)
            JSON.writeHex16(member, into: &out)
            out.append(contentsOf: #"":"#.utf8)
            JSON.writeDecimal(s, into: &out)
        }
        out.append(contentsOf: #"},"to":"#.utf8)
        if flags & Self.toFlag != 0 {
            out.append(UInt8(ascii: "["))
            for i in 0..<toCount {
                out.append(contentsOf: i > 0 ? #",""#.utf8 : #"""#.utf8)
                JSON.writeHex16(Self.u64(targets, i * 8), into: &out)
                out.append(UInt8(ascii: "\""))
            }
            out.append(UInt8(ascii: "]"))
        } else {
            out.append(contentsOf: "null".utf8)
        }
        out.append(contentsOf: reliable ? #","reliable":true,"data":""#.utf8 : #","reliable":false,"data":""#.utf8)
        let bytes = body.assumingMemoryBound(to: UInt8.self)
        Base64.encode(bytes, into: &out)
        out.append(UInt8(ascii: "\""))
        // The flag is the writer's word; a hostile frame's is checked again (never invalid UTF-8 in a string).
        if isUTF8 && Self.isValidUTF8(bytes) {
            out.append(contentsOf: #","text":"#.utf8)
            JSON.writeString(utf8: bytes, into: &out)
        }
        out.append(contentsOf: "}\n".utf8)
    }

    /// Whether `bytes` are valid UTF-8 (checked byte by byte only when not plain ASCII).
    static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var ascii: UInt8 = 0
        for b in bytes { ascii |= b }
        return ascii < 0x80 || String(validating: bytes, as: UTF8.self) != nil
    }

    static func u64(_ p: UnsafeRawBufferPointer, _ at: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<8 { v = v << 8 | UInt64(p[at + i]) }
        return v
    }

    static func u32(_ p: UnsafeRawBufferPointer, _ at: Int) -> UInt32 {
        UInt32(p[at]) << 24 | UInt32(p[at + 1]) << 16 | UInt32(p[at + 2]) << 8 | UInt32(p[at + 3])
    }

    /// Big-endian, in one append (not eight: each append checks capacity and uniqueness).
    private static func put(_ v: UInt64, _ out: inout [UInt8]) {
        withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) }
    }

    private static func put32(_ v: UInt32, _ out: inout [UInt8]) {
        withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) }
    }
}
