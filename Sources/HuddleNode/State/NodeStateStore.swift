import Foundation
import GRDB
import Synchronization
import HuddleControl
import HuddleCore

/// The node's state in its data directory (CONTROL.md, Restart): one SQLite database
/// (`state.sqlite`, WAL) holding the resume point, the retained event log and this member's
/// stored broadcasts, written in transactions, so a crash at any instant leaves the state of the
/// last commit whole (SQLite's journal, with its checksummed frames, cuts a torn tail). Events are
/// written a commit's batch at a time (`EventBatch`: one record, however many events; a group
/// commit), never one record per event; so are this member's broadcasts (`OwnBatch`). Chunks stay
/// files (`ChunkStore`). The directory is locked (`flock` on `lock`) while a node runs on it.
///
/// Durability: `synchronous=NORMAL` — a commit survives the process being killed at any instant;
/// a power loss can lose the last commits, never the database's consistency.
final class NodeStateStore: Sendable {
    /// One retained event: its cursor, its topic bit (`EventLog.bit`) and its frame (`EventFrame`).
    struct StoredEvent: Sendable {
        var cursor: Int64
        var topic: UInt8
        var frame: [UInt8]
    }

    /// Consecutive events `first...last`, written as one record: `data` holds each event's topic
    /// byte and then its frame (`EventFrame`, which says its own length), in cursor order.
    struct EventBatch: Sendable {
        var first: Int64
        var last: Int64
        var data: [UInt8]

        /// `events` (consecutive, at least one) as one batch.
        init(_ events: [StoredEvent]) {
            first = events.first?.cursor ?? 1
            last = events.last?.cursor ?? 0
            data = events.flatMap { [$0.topic] + $0.frame }
        }

        init(first: Int64, last: Int64, data: [UInt8]) {
            self.first = first
            self.last = last
            self.data = data
        }

        /// Its events; nil when `data` does not hold exactly `first...last` as topic and frame each.
        func events() -> [StoredEvent]? {
            // Cursors from the state file (checksummed, but any Int64): no arithmetic that can trap.
            guard first >= 0, first <= last, last - first < Int64(data.count) else { return nil }
            let span = last - first
            var out: [StoredEvent] = []
            let ok = data.withUnsafeBytes { bytes -> Bool in
                var at = 0, n: Int64 = 0
                while at < bytes.count {
                    guard n <= span, let length = EventFrame.frameLength(bytes, at: at + 1), length <= bytes.count - at - 1 else { return false }
                    out.append(StoredEvent(cursor: first + n, topic: bytes[at], frame: Array(bytes[(at + 1)..<(at + 1 + length)])))
                    at += 1 + length
                    n += 1
                }
                return n == span + 1
            }
            return ok ? out : nil
        }
    }

    /// What a previous run left.
    struct Loaded: Sendable {
        var point: ResumePoint
        /// The cursor of the last event it committed.
        var lastCursor: Int64
        var events: [StoredEvent]
        var own: [SignedMessage]
    }

    let directory: String
    private let queue: DatabaseQueue
    /// The `flock`ed descriptor of `lock`, held for the node's whole run (-1 once released by `close`).
    private let lockDescriptor: Mutex<Int32>

    static let fileName = "state.sqlite"
    /// The smallest state file a node leaves (SQLite's first page, with the schema, is 4096 bytes).
    static let minimumSize = 4096

    /// Locks `directory` and opens its state. A database that cannot be opened or read is moved
    /// aside (`damaged-…`), and a fresh one made: `damage` says what was found, in one line.
    static func open(directory: String) throws(NodeError) -> (store: NodeStateStore, damage: String?) {
        let lock = try lockDirectory(directory)
        let path = directory + "/" + fileName
        // Opened once and checked; a damaged file is closed, moved aside, and a new one opened.
        var problem: String?
        var healthy: DatabaseQueue?
        var info = stat()
        if stat(path, &info) == 0, info.st_size < minimumSize {
            // SQLite would take an empty file for a new database: a silent fresh start.
            problem = "it is \(info.st_size) bytes long, shorter than any state a node writes"
        } else {
            do {
                let opened = try openDatabase(path)
                problem = check(opened)
                if problem == nil { healthy = opened } else { try? opened.close() }
            } catch {
                problem = "cannot open it: \(error)"
            }
        }
        var damage: String?
        if let problem {
            let aside = moveAside(directory: directory)
            damage = "\(path) is damaged (\(problem)); moved to \(aside), starting as a new member"
        }
        do {
            return (NodeStateStore(directory: directory, queue: try healthy ?? openDatabase(path), lock: lock), damage)
        } catch {
            Foundation.close(lock)
            throw NodeError("cannot open the node state \(path): \(error)")
        }
    }

    private init(directory: String, queue: DatabaseQueue, lock: Int32) {
        self.directory = directory
        self.queue = queue
        lockDescriptor = Mutex(lock)
    }

    /// The directory is another node's to take once this store is gone.
    deinit { releaseLock() }

    private func releaseLock() {
        let fd = lockDescriptor.withLock { fd in defer { fd = -1 }; return fd }
        if fd >= 0 { Foundation.close(fd) }
    }

    /// WAL pages after which a commit folds the WAL into the database file (SQLite's default is
    /// 1000: 4 MB). The pages a commit changes most — the ends of the retained records, the
    /// B-trees' inner pages — are written to the WAL again by every commit, but folded once per
    /// checkpoint, so fewer checkpoints write fewer pages (and sync less often). At most about
    /// 32 MiB of WAL on disk; a restart reads it back as SQLite does any WAL.
    static let walCheckpointPages = 8192

    private static func openDatabase(_ path: String) throws -> DatabaseQueue {
        var config = Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode=WAL")
            try db.execute(sql: "PRAGMA synchronous=NORMAL")
            try db.execute(sql: "PRAGMA wal_autocheckpoint=\(walCheckpointPages)")
            // Debian builds SQLite with SECURE_DELETE on: every page a dropped record frees is
            // written again, zeroed — its batches of events and of this member's broadcasts, as
            // many pages as a commit adds (strace: 6.5 bytes to the WAL per byte of events at the
            // 256 B row's sender). FAST zeroes what lies in pages written anyway; freed pages keep
            // their bytes until reused (soon: commits take free pages first), as the event spool's
            // files keep the same events until their segment is written over.
            try db.execute(sql: "PRAGMA secure_delete=FAST")
        }
        let queue = try DatabaseQueue(path: path, configuration: config)
        // SQLite makes the file by the umask; its journal files take the file's mode.
        chmod(path, 0o600)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE meta(key TEXT PRIMARY KEY, value BLOB NOT NULL, sum INTEGER NOT NULL);
                CREATE TABLE events(cursor INTEGER PRIMARY KEY, topic INTEGER NOT NULL, line BLOB NOT NULL, sum INTEGER NOT NULL);
                CREATE TABLE own(seq INTEGER PRIMARY KEY, message BLOB NOT NULL, sum INTEGER NOT NULL);
                """)
        }
        // Events a commit's batch to a record (`EventBatch`); `events` keeps the lines of a v1 run.
        migrator.registerMigration("v2") { db in
            try db.execute(sql: "CREATE TABLE event_batches(first INTEGER PRIMARY KEY, last INTEGER NOT NULL, data BLOB NOT NULL, sum INTEGER NOT NULL)")
        }
        // This member's broadcasts a commit's batch to a record (`OwnBatch`); `own` keeps a v2 run's.
        migrator.registerMigration("v3") { db in
            try db.execute(sql: "CREATE TABLE own_batches(first INTEGER PRIMARY KEY, last INTEGER NOT NULL, data BLOB NOT NULL, sum INTEGER NOT NULL)")
        }
        try migrator.migrate(queue)
        return queue
    }

    /// Why the database at hand cannot be resumed from, or nil: SQLite's own check (its pages),
    /// then every record against its checksum (SQLite keeps none for the data it holds), then
    /// every record decoded.
    private static func check(_ queue: DatabaseQueue) -> String? {
        do {
            return try queue.read { db -> String? in
                let verdict = try String.fetchAll(db, sql: "PRAGMA quick_check")
                guard verdict == ["ok"] else { return "SQLite: \(verdict.prefix(2).joined(separator: "; "))" }
                for row in try Row.fetchAll(db, sql: "SELECT key, value, sum FROM meta") {
                    let key: String = row[0], value: Data = row[1]
                    guard sum(key, Array(value)) == row[2] as Int64 else { return "meta record \(key) fails its checksum" }
                }
                if let bytes = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'resume'") {
                    do { _ = try ResumePoint.decode(Array(bytes)) } catch { return "its resume point: \(error)" }
                }
                var point = ResumePoint(member: MemberID(raw: 0), incarnation: 0, ownSeq: 0, counter: 0, delivered: [:], baseline: [:],
                                        nonApplication: [:], addresses: [], epochs: nil)
                for part in Part.allCases {
                    guard let bytes = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [part.rawValue]) else { continue }
                    do { try part.read(Array(bytes), into: &point) } catch { return "its \(part.what): \(error)" }
                }
                let events = try Row.fetchCursor(db, sql: "SELECT cursor, topic, line, sum FROM events")
                while let row = try events.next() {
                    let cursor: Int64 = row[0], topic: Int64 = row[1], line: Data = row[2]
                    guard sum(cursor, topic, Array(line)) == row[3] as Int64 else { return "event \(cursor) fails its checksum" }
                }
                let batches = try Row.fetchCursor(db, sql: "SELECT first, last, data, sum FROM event_batches")
                while let row = try batches.next() {
                    let first: Int64 = row[0], last: Int64 = row[1], data: Data = row[2]
                    let batch = EventBatch(first: first, last: last, data: Array(data))
                    guard batchSum(first, last, batch.data) == row[3] as Int64 else { return "events \(first)...\(last) fail their checksum" }
                    guard batch.events() != nil else { return "events \(first)...\(last) are not readable" }
                }
                for row in try Row.fetchAll(db, sql: "SELECT seq, message, sum FROM own") {
                    let seq: Int64 = row[0], bytes: Data = row[1]
                    guard sum(seq, 0, Array(bytes)) == row[2] as Int64 else { return "stored message \(seq) fails its checksum" }
                    do { _ = try SignedMessage.decode(Array(bytes)) } catch { return "stored message \(seq): \(error)" }
                }
                for row in try Row.fetchAll(db, sql: "SELECT first, last, data, sum FROM own_batches") {
                    let batch = OwnBatch(first: row[0], last: row[1], data: Array(row[2] as Data))
                    guard batchSum(batch.first, batch.last, batch.data) == row[3] as Int64 else { return "stored messages \(batch.first)...\(batch.last) fail their checksum" }
                    guard batch.messages() != nil else { return "stored messages \(batch.first)...\(batch.last) are not readable" }
                }
                if let bytes = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'own_from'"), UInt64(String(decoding: bytes, as: UTF8.self)) == nil {
                    return "its own_from record is not a number"
                }
                return nil
            }
        } catch {
            return "\(error)"
        }
    }

    /// Moves `state.sqlite` and its journal files to a new `damaged-<time>` folder; returns its path.
    private static func moveAside(directory: String) -> String {
        let aside = "\(directory)/damaged-\(Int(Date().timeIntervalSince1970))-\(getpid())"
        mkdir(aside, 0o700)
        for suffix in ["", "-wal", "-shm"] {
            let name = fileName + suffix
            rename("\(directory)/\(name)", "\(aside)/\(name)")
        }
        return aside
    }

    private static func lockDirectory(_ directory: String) throws(NodeError) -> Int32 {
        let path = directory + "/lock"
        let fd = Foundation.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw NodeError("cannot open \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            var buffer = [UInt8](repeating: 0, count: 32)
            let n = pread(fd, &buffer, buffer.count, 0)
            let holder = n > 0 ? String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : "?"
            Foundation.close(fd)
            throw NodeError("data directory \(directory) is in use by another node (pid \(holder)); one node per data directory")
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, pid, pid.count, 0)
        return fd
    }

    /// What the previous run committed, or nil when there was none (a new member).
    func load() throws(NodeError) -> Loaded? {
        do {
            return try queue.read { db -> Loaded? in
                guard let bytes = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'resume'") else { return nil }
                // A member that began to leave is gone for good (`left` is final everywhere): a new member starts.
                if try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'leaving'") != nil { return nil }
                var point = try ResumePoint.decode(Array(bytes))
                for part in Part.allCases {
                    guard let bytes = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [part.rawValue]) else { continue }
                    try part.read(Array(bytes), into: &point)
                }
                let cursorText = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'cursor'").map { String(decoding: $0, as: UTF8.self) }
                let lastCursor = cursorText.flatMap { Int64($0) } ?? 0
                var events: [StoredEvent] = []
                // A v1 run's lines first (each a `json` frame now), then the batches.
                let rows = try Row.fetchCursor(db, sql: "SELECT cursor, topic, line FROM events ORDER BY cursor")
                while let row = try rows.next() {
                    let line: Data = row[2]
                    events.append(StoredEvent(cursor: row[0], topic: UInt8(truncatingIfNeeded: row[1] as Int64), frame: EventFrame.wrap(line: Array(line))))
                }
                let batches = try Row.fetchCursor(db, sql: "SELECT first, last, data FROM event_batches ORDER BY first")
                while let row = try batches.next() {
                    let data: Data = row[2]
                    guard let batch = EventBatch(first: row[0], last: row[1], data: Array(data)).events() else {
                        throw NodeError("events \(row[0] as Int64)...\(row[1] as Int64) are not readable")
                    }
                    events += batch.filter { $0.cursor > (events.last?.cursor ?? Int64.min) }
                }
                // A v2 run's records first, then the batches; from where the last commit kept them on.
                var own: [SignedMessage] = []
                for bytes in try Data.fetchAll(db, sql: "SELECT message FROM own ORDER BY seq") { own.append(try SignedMessage.decode(Array(bytes))) }
                for row in try Row.fetchAll(db, sql: "SELECT first, last, data FROM own_batches ORDER BY first") {
                    guard let messages = OwnBatch(first: row[0], last: row[1], data: Array(row[2] as Data)).messages() else {
                        throw NodeError("stored messages \(row[0] as Int64)...\(row[1] as Int64) are not readable")
                    }
                    own += messages.filter { $0.message.seq > (own.last?.message.seq ?? 0) }
                }
                let ownFrom = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'own_from'").flatMap { UInt64(String(decoding: $0, as: UTF8.self)) } ?? 0
                own.removeAll { $0.message.seq < ownFrom }
                return Loaded(point: point, lastCursor: lastCursor, events: events, own: own)
            }
        } catch {
            throw NodeError("cannot read the node state in \(directory): \(error)")
        }
    }

    /// The parts of the resume point written apart, each only when it changed (`commit`'s `parts`).
    enum Part: String, CaseIterable, Sendable {
        case epochs, journal, activity

        var what: String {
            switch self {
            case .epochs: "epoch history"
            case .journal: "journal"
            case .activity: "activity value"
            }
        }

        /// The part's stored form, from `point` (nil when it has none).
        func bytes(of point: ResumePoint) -> [UInt8]? {
            switch self {
            case .epochs: point.epochs?.encoded()
            case .journal: point.journal?.encoded()
            case .activity: point.activity?.encoded()
            }
        }

        func read(_ bytes: [UInt8], into point: inout ResumePoint) throws(CoreError) {
            switch self {
            case .epochs: point.epochs = try EpochMemory.decode(bytes)
            case .journal: point.journal = try JournalMemory.decode(bytes)
            case .activity: point.activity = try ActivityRecord.decode(bytes)
            }
        }
    }

    /// The deletes of batches wholly below a start (bound twice: `first <` makes it a range of the
    /// primary key), run by every commit.
    static let dropEventBatches = "DELETE FROM event_batches WHERE first < ? AND last < ?"
    static let dropOwnBatches = "DELETE FROM own_batches WHERE first < ? AND last < ?"

    /// SQLite's plan for `sql` (`EXPLAIN QUERY PLAN`, each step's detail), for tests.
    func queryPlan(_ sql: String) throws -> [String] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: [0, 0]).map { ($0["detail"] as String?) ?? "" }
        }
    }

    /// Writes one commit, in one transaction: the events appended since the last one (a record
    /// per batch, each made as it is written: `CommitEvents` bounds them), retention's new start,
    /// the resume point, this member's broadcasts from `ownFrom` on (those below it are dropped),
    /// and the parts of `point` named in `parts` (those that changed; the stored ones of the
    /// others stand).
    func commit(events: some Sequence<EventBatch>, firstRetained: Int64, lastCursor: Int64, point: ResumePoint, own: [SignedMessage], ownFrom: UInt64,
                parts: Set<Part>) throws {
        NodeIO.checkCurrent("a commit of the node state")
        // Statements from the connection's cache: compiled once, not at every commit.
        try queue.write { db in
            for part in Part.allCases where parts.contains(part) {
                guard let bytes = part.bytes(of: point) else { continue }
                try db.cachedStatement(sql: "INSERT OR REPLACE INTO meta(key, value, sum) VALUES (?, ?, ?)")
                    .execute(arguments: [part.rawValue, Data(bytes), Self.sum(part.rawValue, bytes)])
            }
            for batch in events {
                try db.cachedStatement(sql: "INSERT OR REPLACE INTO event_batches(first, last, data, sum) VALUES (?, ?, ?, ?)")
                    .execute(arguments: [batch.first, batch.last, Data(batch.data), Self.batchSum(batch.first, batch.last, batch.data)])
            }
            // A batch goes once retention passed its last event (the load skips the older ones of
            // the first). `first <` as well (implied: a batch's first is at most its last) makes it
            // a range of the primary key; on `last` alone SQLite scanned every retained batch at
            // every commit.
            try db.cachedStatement(sql: Self.dropEventBatches).execute(arguments: [firstRetained, firstRetained])
            try db.cachedStatement(sql: "DELETE FROM events WHERE cursor < ?").execute(arguments: [firstRetained])
            for batch in OwnBatch.batches(own) {
                try db.cachedStatement(sql: "INSERT OR REPLACE INTO own_batches(first, last, data, sum) VALUES (?, ?, ?, ?)")
                    .execute(arguments: [batch.first, batch.last, Data(batch.data), Self.batchSum(batch.first, batch.last, batch.data)])
            }
            // A batch goes once `ownFrom` passed its last message (the load skips the older ones of the first).
            let ownFromValue = Int64(clamping: ownFrom)
            try db.cachedStatement(sql: Self.dropOwnBatches).execute(arguments: [ownFromValue, ownFromValue])
            try db.cachedStatement(sql: "DELETE FROM own WHERE seq < ?").execute(arguments: [ownFromValue])
            let pointBytes = point.encoded(), cursorBytes = Array(String(lastCursor).utf8), ownFromBytes = Array(String(ownFrom).utf8)
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO meta(key, value, sum) VALUES ('resume', ?, ?), ('cursor', ?, ?), ('own_from', ?, ?)")
                .execute(arguments: [Data(pointBytes), Self.sum("resume", pointBytes), Data(cursorBytes), Self.sum("cursor", cursorBytes),
                                     Data(ownFromBytes), Self.sum("own_from", ownFromBytes)])
        }
    }

    /// A record's checksum: 64-bit FNV-1a over its key and its bytes (catches a flipped byte or a
    /// record torn by a disk; SQLite's journal already cuts a torn commit).
    static func sum(_ key: String, _ bytes: [UInt8]) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        hash = (hash ^ 0xff) &* 0x100_0000_01b3
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int64(bitPattern: hash)
    }

    /// A numbered record's checksum (a v1 event: cursor and topic; a v2 run's stored message: seq
    /// and 0), with no string made per record.
    static func sum(_ a: Int64, _ b: Int64, _ bytes: [UInt8]) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for shift in stride(from: 0, to: 128, by: 8) {
            let word = UInt64(bitPattern: shift < 64 ? a : b)
            hash = (hash ^ (word >> UInt64(shift % 64) & 0xff)) &* 0x100_0000_01b3
        }
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int64(bitPattern: hash)
    }

    /// A batch of events' checksum (`EventBatch`): FNV-1a's step over its first and last cursor and
    /// then its bytes 8 at a time (the rest one by one). Each step is a bijection of the hash, so a
    /// changed byte changes it, as with `sum`; 8 times fewer steps than `sum`'s over every event
    /// the node commits (`sum` was 4–7 % of the nodes' CPU in the throughput rows, perf).
    static func batchSum(_ first: Int64, _ last: Int64, _ bytes: [UInt8]) -> Int64 {
        let prime: UInt64 = 0x100_0000_01b3
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        hash = (hash ^ UInt64(bitPattern: first)) &* prime
        hash = (hash ^ UInt64(bitPattern: last)) &* prime
        bytes.withUnsafeBytes { raw in
            let words = raw.count / 8
            for i in 0..<words { hash = (hash ^ raw.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)) &* prime }
            for i in (words * 8)..<raw.count { hash = (hash ^ UInt64(raw[i])) &* prime }
        }
        return Int64(bitPattern: hash)
    }

    /// Closes the database (a clean stop: SQLite folds its journal into the file) and lets the
    /// directory go.
    func close() {
        NodeIO.checkCurrent("closing the node state")
        try? queue.close()
        releaseLock()
    }

    /// Empties the state (a new member starts here: nothing of a member that left may remain).
    func reset() throws(NodeError) {
        do {
            try queue.write { db in try db.execute(sql: "DELETE FROM meta; DELETE FROM events; DELETE FROM event_batches; DELETE FROM own; DELETE FROM own_batches;") }
        } catch {
            throw NodeError("cannot reset the node state in \(directory): \(error)")
        }
    }

    /// Marks the member as leaving, before anyone is told (a crash during the hand-off then
    /// starts a new member, never a member the others hold as `left`).
    func markLeaving() {
        NodeIO.checkCurrent("marking the node state leaving")
        try? queue.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO meta(key, value, sum) VALUES ('leaving', ?, ?)", arguments: [Data([1]), Self.sum("leaving", [1])])
        }
    }

    /// Removes the state for good (`leave`): the member is not to come back.
    func wipe() {
        NodeIO.checkCurrent("wiping the node state")
        try? queue.close()
        for suffix in ["", "-wal", "-shm"] { unlink(directory + "/" + Self.fileName + suffix) }
    }
}
