import Foundation

/// The bytes of the event log, end to end at increasing offsets: the newest in memory (`tail`, at
/// most `flushBytes` plus one event), everything older in segment files in the data directory.
/// Each segment file is unlinked the moment it is created, so it lives exactly as long as the
/// node holds it open: nothing is left behind by a crash, and a segment dropped from the front is
/// gone with its pages. What the kernel caches of them is page cache, not the node's memory.
///
/// A segment dropped from the front is kept (at most `spareSegments` of them) and written over from
/// its start when the next segment is needed: once retention is full, the log writes into
/// page-cache pages it already has instead of new ones the kernel must allocate first (on the
/// 2-core VM of issue 24, 100 MB of 256 KiB `pwrite`s ran at 1.75–3.5 GB/s into new pages and
/// 7 GB/s over written ones; `copy_folio_from_iter_atomic`, that copy, was 2–18 % of the node
/// processes' samples in three profiles of huddle-bench's 256 B throughput row).
///
/// Guarantees: `read` returns exactly the bytes appended in `start..<end`; the node's own memory
/// for retention is the tail, whatever the segments hold. A failed write (a full disk) drops what
/// was unwritten from retention (`start` moves past it) and is reported once in `failure`; live
/// events still reach subscribers from the tail.
struct EventSpool {
    /// Bytes gathered in memory before one write to the current segment.
    let flushBytes: Int
    /// Bytes per segment file: retention drops whole segments from the front.
    let segmentBytes: Int

    /// One unlinked file of consecutive log bytes; closed when the last reference goes.
    private final class Segment {
        let fd: Int32
        var start: Int64
        var length: Int64 = 0
        init(fd: Int32, start: Int64) { self.fd = fd; self.start = start }
        deinit { close(fd) }
    }

    let directory: String
    private var segments: [Segment] = []
    /// Dropped segments kept to be written over (their old bytes are never read: `length` is 0).
    private var spare: [Segment] = []
    /// Most dropped segments kept for reuse (each holds up to `segmentBytes` of page cache).
    static let spareSegments = 2
    private(set) var tail: [UInt8] = []
    /// The offset of `tail[0]`.
    private(set) var tailStart: Int64 = 0
    /// The oldest offset `read` can still return.
    private(set) var start: Int64 = 0
    /// The first write or create error, if any.
    private(set) var failure: String?

    init(directory: String, flushBytes: Int = 256 << 10, segmentBytes: Int = 8 << 20) {
        self.directory = directory
        self.flushBytes = flushBytes
        self.segmentBytes = segmentBytes
        tail.reserveCapacity(flushBytes + 4096)
    }

    /// One past the newest byte.
    var end: Int64 { tailStart + Int64(tail.count) }

    /// Appends bytes written by `write` (one event's line) at `end`.
    mutating func append(_ write: (inout [UInt8]) -> Void) {
        write(&tail)
        if tail.count >= flushBytes { flush() }
    }

    /// Writes the tail to the current segment (a new one when it is full).
    private mutating func flush() {
        let written = tail.count
        defer {
            tailStart += Int64(written)
            tail.removeAll(keepingCapacity: true)
        }
        if segments.last.map({ $0.length >= Int64(segmentBytes) }) ?? true {
            guard let segment = makeSegment(at: tailStart) else { return lose(through: tailStart + Int64(written)) }
            segments.append(segment)
        }
        let segment = segments[segments.count - 1]
        let ok = tail.withUnsafeBytes { writeAll(segment.fd, $0, at: Int(segment.length)) }
        guard ok else { return lose(through: tailStart + Int64(written), "write: \(String(cString: strerror(errno)))") }
        segment.length += Int64(written)
    }

    private mutating func makeSegment(at offset: Int64) -> Segment? {
        if let reused = spare.popLast() {
            reused.start = offset
            reused.length = 0
            return reused
        }
        var template = Array("\(directory)/.events-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            if failure == nil { failure = "cannot create an event log segment in \(directory): \(String(cString: strerror(errno)))" }
            return nil
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return Segment(fd: fd, start: offset)
    }

    /// What could not be written is no longer retained: everything before `offset` is dropped.
    private mutating func lose(through offset: Int64, _ why: String? = nil) {
        if failure == nil, let why { failure = "event log segment \(why)" }
        segments.removeAll()
        start = offset
    }

    /// Drops whole segments that end at or before `offset` (retention moved past them).
    mutating func drop(before offset: Int64) {
        start = max(start, offset)
        var n = 0
        while n < segments.count, segments[n].start + segments[n].length <= offset { n += 1 }
        if n > 0 {
            for segment in segments[..<n] where spare.count < Self.spareSegments { spare.append(segment) }
            segments.removeFirst(n)
        }
    }

    /// Appends the bytes `range` to `out`; false when they are not all retained or a read failed.
    func read(_ range: Range<Int64>, into out: inout [UInt8]) -> Bool {
        guard range.lowerBound >= start && range.upperBound <= end else { return false }
        var at = range.lowerBound
        if at < tailStart {
            let fromFiles = min(range.upperBound, tailStart)
            let before = out.count
            let count = Int(fromFiles - at)
            out.append(contentsOf: repeatElement(0, count: count))
            let ok = out.withUnsafeMutableBytes { whole -> Bool in
                var done = 0
                for segment in segments where segment.start + segment.length > at && segment.start < fromFiles {
                    let from = at - segment.start
                    let take = Int(min(segment.start + segment.length, fromFiles) - at)
                    var got = 0
                    while got < take {
                        let n = pread(segment.fd, whole.baseAddress! + before + done + got, take - got, off_t(from) + off_t(got))
                        if n < 0 && errno == EINTR { continue }
                        guard n > 0 else { return false }
                        got += n
                    }
                    done += take
                    at += Int64(take)
                }
                return done == count
            }
            guard ok else { out.removeLast(out.count - before); return false }
            at = fromFiles
        }
        if at < range.upperBound {
            out.append(contentsOf: tail[Int(at - tailStart)..<Int(range.upperBound - tailStart)])
        }
        return true
    }
}
