import Foundation
import Synchronization

/// The bytes of the event log, end to end at increasing offsets: the newest in memory (`tail`, at
/// most `flushBytes` plus one event), then the flushed tails not yet written (`pending`), everything
/// older in segment files in the data directory. Each segment file is unlinked the moment it is
/// created, so it lives exactly as long as the node holds it open: nothing is left behind by a
/// crash, and a segment dropped from the front is gone with its pages. What the kernel caches of
/// them is page cache, not the node's memory.
///
/// The files are written on an I/O queue of their own (`NodeIO`), never by the node's actor: a full
/// tail is handed over whole and kept in `pending` until the writer has written it, so a read
/// never waits for the writer. Segments are made, written, reused and closed on that queue only.
///
/// A segment dropped from the front is kept (at most `spareSegments` of them) and written over from
/// its start when the next segment is needed: once retention is full, the log writes into
/// page-cache pages it already has instead of new ones the kernel must allocate first (on the
/// 2-core VM of issue 24, 100 MB of 256 KiB `pwrite`s ran at 1.75–3.5 GB/s into new pages and
/// 7 GB/s over written ones; `copy_folio_from_iter_atomic`, that copy, was 2–18 % of the node
/// processes' samples in three profiles of huddle-bench's 256 B throughput row).
///
/// Guarantees: `read` returns exactly the bytes appended in `start..<end`; the node's own memory
/// for retention is the tail and the bytes waiting for the writer, whatever the segments hold: a
/// writer more than `pendingLimit` behind (a disk throttling its writes) is waited for by whoever
/// makes events, off the node's actor (`writerWait`), and an append never waits for it (issue 35,
/// item 4). So what waits is at most `pendingLimit` and what the inputs that do not wait (a timer
/// tick, a link that came up or closed, a chunk stored) made meanwhile (`overshoot` is the most
/// seen past the limit). A failed write (a full disk)
/// drops what was unwritten from retention (`start` moves past it) and is reported once in
/// `failure`; live events still reach subscribers from the tail.
struct EventSpool {
    /// Bytes gathered in memory before one write to the current segment.
    let flushBytes: Int
    /// Bytes per segment file: retention drops whole segments from the front.
    let segmentBytes: Int
    /// Most bytes handed to the writer and not yet written.
    let pendingLimit: Int
    /// Most dropped segments kept for reuse (each holds up to `segmentBytes` of page cache).
    static let spareSegments = 2

    let directory: String
    private let files: SpoolFiles
    private let io: NodeIO
    /// Tails handed to the writer and not yet known written, consecutive, ending at `tailStart`.
    private var pending: [(start: Int64, bytes: [UInt8])] = []
    private var pendingBytes = 0
    private(set) var tail: [UInt8] = []
    /// The offset of `tail[0]`.
    private(set) var tailStart: Int64 = 0
    /// The oldest offset `read` can still return (past what retention dropped or a write lost).
    private(set) var start: Int64 = 0
    /// The most bytes seen waiting for the writer past `pendingLimit` (appends never wait for it).
    private(set) var overshoot = 0
    /// Written tails from here on stay in memory while they take at most half of `pendingLimit`
    /// (`keep(from:)`: the events a commit of the node's state is still to read).
    private var keepFrom = Int64.max

    init(directory: String, flushBytes: Int = 256 << 10, segmentBytes: Int = 8 << 20, pendingLimit: Int = 32 << 20, io: NodeIO = NodeIO()) {
        self.directory = directory
        self.flushBytes = flushBytes
        self.segmentBytes = segmentBytes
        self.pendingLimit = max(pendingLimit, flushBytes)
        self.io = io
        files = SpoolFiles(directory: directory, segmentBytes: segmentBytes, spares: Self.spareSegments)
        tail.reserveCapacity(flushBytes + 4096)
    }

    /// The first write or create error, if any.
    var failure: String? { files.failure }

    /// One past the newest byte.
    var end: Int64 { tailStart + Int64(tail.count) }

    /// Appends bytes written by `write` (one event's line) at `end`.
    mutating func append(_ write: (inout [UInt8]) -> Void) {
        write(&tail)
        if tail.count >= flushBytes { flush() }
    }

    /// Hands the tail to the writer (it stays readable from `pending` until written).
    private mutating func flush() {
        var full: [UInt8] = []
        full.reserveCapacity(flushBytes + 4096)
        swap(&full, &tail)
        let offset = tailStart
        tailStart += Int64(full.count)
        pending.append((offset, full))
        pendingBytes += full.count
        let files = files, handed = full
        io.submit { files.write(handed, at: offset) }
        prune()
    }

    /// Keeps the written tails from `offset` on in memory (within half of `pendingLimit`): the
    /// node's commits read them, and are then not made to read the files on its actor.
    mutating func keep(from offset: Int64) {
        keepFrom = offset
        prune()
    }

    /// What the writer finished (or lost) is read from the files from now on, but for what is kept.
    private mutating func prune() {
        let (written, lost) = files.progress
        start = max(start, lost)
        while let first = pending.first, first.start + Int64(first.bytes.count) <= written,
              first.start + Int64(first.bytes.count) <= keepFrom || pendingBytes > pendingLimit / 2 { forget() }
        // A writer more than `pendingLimit` behind (a disk that throttles its writes) is waited for
        // off the caller (`writerWait`), never here.
        overshoot = max(overshoot, pendingBytes - pendingLimit)
    }

    /// More than `pendingLimit` bytes wait for the writer: whoever makes events waits for it
    /// (`writerWait`) before making more.
    var writerBehind: Bool { pendingBytes > pendingLimit }

    /// A wait for the writer to finish what it was handed, to run off the caller (on the node, an
    /// `await` that frees its actor); nil when the writer is not behind. `writerProgressed()` then
    /// lets what it wrote go from memory.
    func writerWait() -> (@Sendable () async -> Void)? {
        guard writerBehind else { return nil }
        let io = io
        return { _ = try? await io.run { () } }
    }

    /// Lets what the writer finished go from memory (after `writerWait`).
    mutating func writerProgressed() { prune() }

    private mutating func forget() {
        pendingBytes -= pending[0].bytes.count
        pending.removeFirst()
    }

    /// Drops whole segments that end at or before `offset` (retention moved past them).
    mutating func drop(before offset: Int64) {
        start = max(start, offset)
        while let first = pending.first, first.start + Int64(first.bytes.count) <= start { forget() }
        let files = files
        let released = files.detach(before: start)
        if !released.isEmpty { io.submit { files.release(released) } }
    }

    /// The oldest offset still readable (past what retention dropped and what a failed write lost).
    var readableStart: Int64 { max(start, files.progress.lost) }

    /// Where the bytes held in memory (waiting for the writer, or the tail) start: what is before it
    /// is in the files.
    var memoryStart: Int64 { pending.first?.start ?? tailStart }

    /// Reads `range` (in the files) on the spool's I/O queue, after the writes and closes handed
    /// over before; nil when it is not all there (retention dropped it, a write failed).
    func fileLoader(_ range: Range<Int64>) -> @Sendable () async -> [UInt8]? {
        let files = files, io = io
        return {
            let read = try? await io.run { () -> [UInt8]? in
                io.testReadDelay()
                var out: [UInt8] = []
                return files.read(range, into: &out) ? out : nil
            }
            return read ?? nil
        }
    }

    /// The bytes `range`, all in memory (from `memoryStart` on), as consecutive pieces: slices of
    /// the tails waiting for the writer — shared with them, not copied — then a copy of the part
    /// in the tail (at most `flushBytes` and one event; the tail itself is appended to in place).
    /// Nil when `range` is not all in memory.
    func memoryPieces(_ range: Range<Int64>) -> [ArraySlice<UInt8>]? {
        guard range.lowerBound >= memoryStart, range.lowerBound >= readableStart, range.upperBound <= end else { return nil }
        var pieces: [ArraySlice<UInt8>] = []
        var at = range.lowerBound
        for chunk in pending where at < range.upperBound && chunk.start + Int64(chunk.bytes.count) > at {
            let to = min(range.upperBound, chunk.start + Int64(chunk.bytes.count))
            pieces.append(chunk.bytes[Int(at - chunk.start)..<Int(to - chunk.start)])
            at = to
        }
        if at < range.upperBound {
            // Copied through a pointer: `Array(tail[...])` of the whole tail shares its buffer, and the
            // next append would copy it (into a buffer of exactly its size) instead.
            let part = Int(at - tailStart)..<Int(range.upperBound - tailStart)
            pieces.append(tail.withUnsafeBufferPointer { ArraySlice(Array(UnsafeBufferPointer(rebasing: $0[part]))) })
        }
        return pieces
    }

    /// Appends the bytes `range` to `out`; false when they are not all retained or a read failed.
    func read(_ range: Range<Int64>, into out: inout [UInt8]) -> Bool {
        guard range.lowerBound >= readableStart && range.upperBound <= end else { return false }
        var at = range.lowerBound
        // Everything before the first pending tail is in the files.
        let pendingStart = pending.first?.start ?? tailStart
        if at < pendingStart {
            let fromFiles = min(range.upperBound, pendingStart)
            guard files.read(at..<fromFiles, into: &out) else { return false }
            at = fromFiles
        }
        for chunk in pending where at < range.upperBound && chunk.start + Int64(chunk.bytes.count) > at {
            let to = min(range.upperBound, chunk.start + Int64(chunk.bytes.count))
            out.append(contentsOf: chunk.bytes[Int(at - chunk.start)..<Int(to - chunk.start)])
            at = to
        }
        if at < range.upperBound {
            out.append(contentsOf: tail[Int(at - tailStart)..<Int(range.upperBound - tailStart)])
        }
        return true
    }
}

/// The spool's segment files, shared by the node's actor (reads, `detach`) and the spool's I/O
/// queue (everything that makes, writes, reuses or closes a file). Sendable: every field is
/// immutable or behind a `Mutex`; a descriptor is closed only on the I/O queue, after the actor
/// detached its segment from `shared.segments` (it never reads one it detached), so a read never
/// meets a closed or reused descriptor.
private final class SpoolFiles: Sendable {
    struct Segment {
        let fd: Int32
        let start: Int64
        var length: Int64
        var end: Int64 { start + length }
    }

    struct Shared {
        /// The readable segments, in offset order.
        var segments: [Segment] = []
        /// Every byte before it is written or lost.
        var written: Int64 = 0
        /// Every byte before it that a failed write lost.
        var lost: Int64 = 0
        var failure: String?
        /// The descriptor the writer appends to (never detached while it is).
        var current: Int32?
    }

    let directory: String
    let segmentBytes: Int
    let spares: Int
    private let shared = Mutex(Shared())
    /// Descriptors of detached segments kept to be written over (the I/O queue's alone).
    private let spare = Mutex<[Int32]>([])

    init(directory: String, segmentBytes: Int, spares: Int) {
        self.directory = directory
        self.segmentBytes = segmentBytes
        self.spares = spares
    }

    deinit {
        for segment in shared.withLock({ $0.segments }) { close(segment.fd) }
        for fd in spare.withLock({ $0 }) { close(fd) }
    }

    var failure: String? { shared.withLock { $0.failure } }
    var progress: (written: Int64, lost: Int64) { shared.withLock { ($0.written, $0.lost) } }

    /// On the I/O queue: writes `bytes`, the log's bytes from `offset`, at the end of the current
    /// segment (a new or spare one when it is full or does not end at `offset`).
    func write(_ bytes: [UInt8], at offset: Int64) {
        NodeIO.checkCurrent("an event spool write")
        let count = Int64(bytes.count)
        var target = shared.withLock { s -> Segment? in
            guard let last = s.segments.last, last.fd == s.current, last.length < Int64(segmentBytes), last.end == offset else { return nil }
            return last
        }
        if target == nil {
            guard let fd = spare.withLock({ $0.popLast() }) ?? makeFile() else { return lose(through: offset + count) }
            let segment = Segment(fd: fd, start: offset, length: 0)
            shared.withLock { s in
                s.segments.append(segment)
                s.current = fd
            }
            target = segment
        }
        guard let segment = target else { return }
        let ok = bytes.withUnsafeBytes { writeAll(segment.fd, $0, at: Int(segment.length)) }
        guard ok else { return lose(through: offset + count, "write: \(String(cString: strerror(errno)))") }
        shared.withLock { s in
            if let i = s.segments.lastIndex(where: { $0.fd == segment.fd }) { s.segments[i].length += count }
            s.written = offset + count
        }
    }

    private func makeFile() -> Int32? {
        var template = Array("\(directory)/.events-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            let why = "cannot create an event log segment in \(directory): \(String(cString: strerror(errno)))"
            shared.withLock { s in if s.failure == nil { s.failure = why } }
            return nil
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }

    /// What could not be written is no longer retained: everything before `offset` is lost, and
    /// the next write starts a new segment.
    private func lose(through offset: Int64, _ why: String? = nil) {
        shared.withLock { s in
            if s.failure == nil, let why { s.failure = "event log segment \(why)" }
            s.lost = max(s.lost, offset)
            s.written = max(s.written, offset)
            s.current = nil
        }
    }

    /// On the actor: takes the segments that end at or before `offset` out of the readable ones
    /// (never the one being written) and returns their descriptors, for `release` on the I/O queue.
    func detach(before offset: Int64) -> [Int32] {
        shared.withLock { s in
            var n = 0
            while n < s.segments.count, s.segments[n].end <= offset, s.segments[n].fd != s.current { n += 1 }
            guard n > 0 else { return [] }
            defer { s.segments.removeFirst(n) }
            return s.segments[..<n].map(\.fd)
        }
    }

    /// On the I/O queue: detached segments are kept to be written over, or closed.
    func release(_ fds: [Int32]) {
        NodeIO.checkCurrent("closing event spool segments")
        for fd in fds {
            let kept = spare.withLock { spare in
                guard spare.count < spares else { return false }
                spare.append(fd)
                return true
            }
            if !kept { close(fd) }
        }
    }

    /// Appends the bytes `range` (all in segments) to `out`; false when one is missing or a read failed.
    func read(_ range: Range<Int64>, into out: inout [UInt8]) -> Bool {
        IOThreads.check("an event spool read")
        let segments = shared.withLock { $0.segments }
        let before = out.count
        let count = Int(range.upperBound - range.lowerBound)
        out.append(contentsOf: repeatElement(0, count: count))
        var at = range.lowerBound
        let ok = out.withUnsafeMutableBytes { whole -> Bool in
            for segment in segments where segment.end > at && segment.start <= at && at < range.upperBound {
                let from = at - segment.start
                let take = Int(min(segment.end, range.upperBound) - at)
                var got = 0
                while got < take {
                    let n = pread(segment.fd, whole.baseAddress! + before + Int(at - range.lowerBound) + got, take - got, off_t(from) + off_t(got))
                    if n < 0 && errno == EINTR { continue }
                    guard n > 0 else { return false }
                    got += n
                }
                at += Int64(take)
            }
            return at == range.upperBound
        }
        guard ok else { out.removeLast(out.count - before); return false }
        return true
    }
}
