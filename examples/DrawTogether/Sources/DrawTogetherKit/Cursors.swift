/// Where a participant's pointer is on the canvas, sent unreliably (a datagram) as it moves;
/// `point` nil when it left the canvas. JSON `{"point": [x, y]}` or `{}`.
public struct CursorMessage: Codable, Sendable, Equatable {
    public let point: Point?
    public init(point: Point?) { self.point = point }
}

/// The other participants' pointers as this participant last heard of them. A pure value: the
/// caller gives the time.
///
/// Guarantees: a pointer is shown only while its participant is in the participant set given and
/// was heard of less than `staleAfter` ago (senders repeat a still pointer every
/// `CursorThrottle.refresh`, so a lost datagram or two does not hide it, and a pointer whose sender
/// went quiet goes); it holds at most one entry per participant, and no more than `maxEntries`.
public struct CursorTable: Sendable {
    /// A pointer not heard of for this long is no longer shown.
    public static let staleAfter: Duration = .seconds(3)
    /// Most pointers kept (a participant set is smaller: the node holds at most 64 participants).
    public static let maxEntries = 256

    private var entries: [String: (point: Point, heard: ContinuousClock.Instant)] = [:]

    public init() {}

    /// Participant `id` reports its pointer at `point` (nil: off the canvas) at `now`.
    public mutating func heard(_ id: String, at point: Point?, now: ContinuousClock.Instant) {
        guard let point else { entries[id] = nil; return }
        guard entries[id] != nil || entries.count < Self.maxEntries else { return }
        entries[id] = (point, now)
    }

    /// The pointers to show at `now`, by participant id, for the participants in `present`.
    public func visible(present: Set<String>, now: ContinuousClock.Instant) -> [String: Point] {
        entries.filter { present.contains($0.key) && now - $0.value.heard < Self.staleAfter }.mapValues(\.point)
    }

    /// Forgets the pointers that are stale at `now` or whose participant is not in `present`;
    /// true when it forgot any.
    public mutating func prune(present: Set<String>, now: ContinuousClock.Instant) -> Bool {
        let before = entries.count
        entries = entries.filter { present.contains($0.key) && now - $0.value.heard < Self.staleAfter }
        return entries.count != before
    }

    /// Whether it holds any pointer.
    public var isEmpty: Bool { entries.isEmpty }
}

/// When this participant sends its own pointer: at most one message per `interval` (20 Hz), the
/// latest position only (positions in between are coalesced away), and a still pointer again every
/// `refresh` so that others keep showing it. A pure value: the caller gives the time and sends.
public struct CursorThrottle: Sendable {
    /// At most one pointer message per this long.
    public static let interval: Duration = .milliseconds(50)
    /// A pointer that did not move is sent again this often.
    public static let refresh: Duration = .seconds(1)

    /// The position to send next (set while a send is due).
    public private(set) var pending: CursorMessage?
    /// The last position given (nil: off the canvas).
    public private(set) var latest: CursorMessage?
    private var lastSent: ContinuousClock.Instant?

    public init() {}

    /// The pointer moved to `message`'s position at `now`. Returns when to call `take`: now, or
    /// once `interval` has passed since the last send; nil when a send is already due (it will
    /// carry this position).
    public mutating func moved(_ message: CursorMessage, now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        latest = message
        let due = pending != nil
        pending = message
        if due { return nil }
        guard let lastSent else { return now }
        return max(now, lastSent + Self.interval)
    }

    /// The message to send at `now` (nil when nothing is pending); it counts as sent.
    public mutating func take(now: ContinuousClock.Instant) -> CursorMessage? {
        guard let message = pending else { return nil }
        pending = nil
        lastSent = now
        return message
    }

    /// Whether a still pointer should be sent again at `now`: it is on the canvas, nothing is
    /// pending, and nothing was sent for `refresh`.
    public func needsRefresh(now: ContinuousClock.Instant) -> Bool {
        guard latest?.point != nil, pending == nil, let lastSent else { return false }
        return now - lastSent >= Self.refresh
    }
}
