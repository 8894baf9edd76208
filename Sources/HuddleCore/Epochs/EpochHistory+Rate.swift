/// The rate of epoch changes per maker (issue 33): a member spamming `rekey` made every member
/// fsync its key file per change, and stranded offline members after `maxChanges` changes.
///
/// Every change carries its maker's signed wall-clock time (`EpochChange.madeAt`). The rule reads
/// only that data, so every member decides alike whatever order changes arrive in and whatever
/// its own clock says:
/// - its **release** is a generic cell rate (GCRA) over the maker's changes in its ancestry, by their
///   signed times: `changeBurst` in a row, then one per `changeInterval` sustained. A change is
///   released at its own time, or later when the maker's earlier ones used up its burst. A time
///   not above the maker's previous one counts as just after it: never a refusal, because how much
///   of a maker's past a member holds differs (a joiner's history starts at its root) and a
///   refusal that depends on it would fork members; the difference only moves a release.
/// - A change whose release is still to come on this member's wall clock is kept aside
///   (`delayed`, at most `maxWaiting`; a release less than `clockTolerance` ahead counts at once)
///   and taken as if it arrived
///   then (`releaseDelayed`): a delay, like a slow network, never a refusal, so members that take
///   it at slightly different moments do not fork — they hold the same changes once it is due
///   everywhere, and the fork choice is a function of the changes alone. The slots are budgeted
///   per maker: at most `changeBurst` + 1 per maker (its latest release goes), and when the list is
///   full the maker holding the most slots loses its latest. A hostile maker that floods
///   near-future changes (siblings each) therefore holds a handful of slots and never pushes out an
///   honest maker's delayed change; only more than `maxWaiting` makers on the roster, each with a
///   delayed change, can. A change dropped comes back with the next hand-over (a peer on another
///   head hands its branch).
///   A change stamped in the future is taken once the clock reaches its time, like an activity.
/// - This member's own changes never wait: it stamps the wall-clock time (above its previous one)
///   and does not make a change above its rate (`CoreError.Code.rateLimited`; routine rotation and
///   re-issues try again later).
///
/// Limit: a maker's changes older than the kept history (`maxChanges`, the grace) no longer count
/// for its rate; members that forgot different amounts of the past may then release one change at
/// different moments, never differently for good.
extension EpochHistory {
    /// The wall-clock second at which `change` may count (its parent must be known).
    func release(of change: EpochChange) -> Double {
        var times: [UInt64] = []
        var cursor: [UInt8]? = change.parent
        while let h = cursor, let entry = entries[h] {
            if entry.makerNodeKey == change.makerNodeKey, let madeAt = entry.change?.madeAt { times.append(madeAt) }
            cursor = entry.parent
        }
        return release(at: change.madeAt, after: times.reversed())
    }

    /// The GCRA: the release of a change signed at `madeAt` after the maker's earlier ones (oldest first).
    func release(at madeAt: UInt64, after earlier: some Sequence<UInt64>) -> Double {
        let interval = max(settings.changeInterval, 0), tolerance = interval * Double(max(settings.changeBurst - 1, 0))
        var tat = -Double.infinity
        var last: UInt64?
        func step(_ signed: UInt64) -> Double {
            // A time not above the previous one counts as a millisecond after it (monotone).
            let ms = last.map { max(signed, $0 &+ 1) } ?? signed
            last = ms
            let t = Double(ms) / 1000
            let release = max(t, tat - tolerance)
            tat = max(tat, release) + interval
            return release
        }
        for ms in earlier { _ = step(ms) }
        return step(madeAt)
    }

    /// The signed time this member puts in a change on `base`: its wall clock in milliseconds, above
    /// its previous change's in that ancestry; and when that change would be released.
    func stamp(on base: [UInt8], now: Double) -> (madeAt: UInt64, release: Double) {
        let wall = now + wallClockOffset
        let ms = wall.isFinite && wall > 0 ? UInt64(min(wall * 1000, Double(WireReader.madeCountLimit))) : 0
        var times: [UInt64] = []
        var cursor: [UInt8]? = base
        while let h = cursor, let entry = entries[h] {
            if entry.makerNodeKey == nodeKey, let madeAt = entry.change?.madeAt { times.append(madeAt) }
            cursor = entry.parent
        }
        let madeAt = min(times.first.map { max(ms, $0 &+ 1) } ?? ms, WireReader.madeCountLimit)
        return (madeAt, release(at: madeAt, after: times.reversed()))
    }

    /// Most delayed changes one maker holds (see above).
    var delayedPerMaker: Int { max(settings.changeBurst, 0) + 1 }

    /// Keeps `change` aside until `release`: at most `delayedPerMaker` per maker and `maxWaiting`
    /// in all; over either, the latest release of the maker holding the most goes (see above).
    mutating func delay(_ change: EpochChange, hash: [UInt8], release: Double) {
        guard !delayed.contains(where: { $0.hash == hash }) else { return }
        delayed.append((hash, change, release))
        var held: [[UInt8]: Int] = [:]
        for entry in delayed { held[entry.change.makerNodeKey, default: 0] += 1 }
        let over: [UInt8]?
        if (held[change.makerNodeKey] ?? 0) > delayedPerMaker {
            over = change.makerNodeKey
        } else if delayed.count > settings.maxWaiting {
            // The maker holding the most slots (ties: the lowest node key, the same at every member).
            over = held.max { $0.value != $1.value ? $0.value < $1.value : bytesPrecede($1.key, $0.key) }?.key
        } else {
            over = nil
        }
        guard let over else { return }
        let theirs = delayed.indices.filter { delayed[$0].change.makerNodeKey == over }
        if let latest = theirs.max(by: { delayed[$0].release != delayed[$1].release ? delayed[$0].release < delayed[$1].release : bytesPrecede(delayed[$0].hash, delayed[$1].hash) }) {
            delayed.remove(at: latest)
        }
    }

    /// When the next delayed change is due, on the session core's clock (nil: none waits).
    public var nextRelease: Double? {
        delayed.map(\.release).min().map { $0 - settings.clockTolerance - wallClockOffset }
    }

    /// Takes every delayed change that is due (its release within `clockTolerance` of the wall
    /// clock), as if it arrived now.
    public mutating func releaseDelayed(now: Double) -> EpochReceipt {
        let wall = now + wallClockOffset + settings.clockTolerance
        let due = delayed.filter { $0.release <= wall }
        guard !due.isEmpty else { return .duplicate }
        delayed.removeAll { $0.release <= wall }
        let before = (head: head, removed: isRemoved, key: current)
        var refused: Refusal?
        for (hash, change, _) in due.sorted(by: { $0.release < $1.release }) where entries[hash] == nil {
            if entries[change.parent] == nil {
                waiting.append((hash, change))
                if waiting.count > settings.maxWaiting { waiting.removeFirst(waiting.count - settings.maxWaiting) }
            } else if let reason = insert(change, hash: hash, now: now) {
                refused = reason
            }
        }
        releaseWaiting(now: now)
        settle(now: now)
        let receipt = receipt(before: before)
        if receipt == .recorded, let refused { return .refused(refused) }
        return receipt
    }
}
