import HuddleControl

/// The shared canvas as one participant sees it: strokes of every canvas (one per reset) and which
/// canvas is current.
///
/// Guarantees: applying the same set of messages in any order that keeps each stroke's points
/// after nothing (points merge by (stroke, index)) gives the same state, and catch-ups only add
/// what is missing — so every participant that has received the same strokes, live or through
/// catch-ups, shows the same canvas. Messages for a canvas that is not current are kept (a
/// concurrent reset may still make it current) but not shown.
public struct CanvasModel: Sendable {
    /// Strokes by canvas id, then by stroke id.
    public private(set) var canvases: [String: [String: Stroke]] = [:]
    /// The canvas being shown: the session activity's `drawtogether.canvas` ("" before any reset).
    public private(set) var current = ""
    /// The largest `pointCount` any catch-up claimed for the current canvas.
    public private(set) var bestCatchUp = 0
    /// Messages ignored: newer protocol versions, unknown types, malformed bodies.
    public private(set) var ignored = 0

    public init() {}

    public var strokes: [Stroke] { (canvases[current] ?? [:]).values.sorted { $0.id < $1.id } }
    public var pointCount: Int { (canvases[current] ?? [:]).values.reduce(0) { $0 + $1.points.count } }

    /// Applies one message body; false when it was ignored (see `ignored`).
    @discardableResult
    public mutating func apply(text: String) -> Bool {
        do {
            apply(try DrawMessage.decode(text))
            return true
        } catch {
            ignored += 1
            return false
        }
    }

    public mutating func apply(_ message: DrawMessage) {
        switch message {
        case let .upsertStroke(canvas, id, color, index, point):
            canvases[canvas, default: [:]][id, default: Stroke(id: id, color: color)].points[index] = point
        case let .canvas(canvas, strokes, pointCount):
            // The sample keeps the catch-up with the highest pointCount. Here every part merges by
            // (stroke, index), which keeps everything the highest one has and loses nothing a lower
            // one had (a point the best sender had not yet seen).
            if canvas == current { bestCatchUp = max(bestCatchUp, pointCount) }
            for stroke in strokes {
                var mine = canvases[canvas, default: [:]][stroke.id] ?? Stroke(id: stroke.id, color: stroke.color)
                mine.points.merge(stroke.points) { have, _ in have }
                canvases[canvas, default: [:]][stroke.id] = mine
            }
        }
    }

    /// The session activity changed: `activity` is its JSON value (or nil).
    public mutating func setActivity(_ activity: JSON?) {
        let canvas = Self.canvasID(activity)
        if canvas != current { bestCatchUp = 0 }
        current = canvas
    }

    /// The canvas id inside a session activity value: `{"drawtogether": {"canvas": ID}}`.
    public static func canvasID(_ activity: JSON?) -> String {
        activity?.objectValue?["drawtogether"]?.objectValue?["canvas"]?.stringValue ?? ""
    }

    /// The activity value that makes `canvas` current.
    public static func activity(canvas: String) -> JSON {
        ["drawtogether": ["canvas": .string(canvas), "v": .int(DrawMessage.version)]]
    }

    /// The current canvas as catch-up messages for a late joiner, each body under `maxBytes`.
    public func catchUp(maxBytes: Int = 48 * 1024) -> [DrawMessage] {
        let total = pointCount
        var parts: [DrawMessage] = []
        var batch: [Stroke] = []
        var bytes = 0
        func flush() {
            if !batch.isEmpty { parts.append(.canvas(canvas: current, strokes: batch, pointCount: total)) }
            batch = []; bytes = 0
        }
        for stroke in strokes {
            // Long strokes go in slices of 1,000 points (about 40 KB), so every part fits a message.
            let sorted = stroke.points.sorted { $0.key < $1.key }
            let slices = sorted.isEmpty ? [[]] : stride(from: 0, to: sorted.count, by: 1000).map { Array(sorted[$0..<min(sorted.count, $0 + 1000)]) }
            for slice in slices {
                let size = 64 + slice.count * 40
                if bytes + size > maxBytes { flush() }
                batch.append(Stroke(id: stroke.id, color: stroke.color, points: Dictionary(uniqueKeysWithValues: slice.map { ($0.key, $0.value) })))
                bytes += size
            }
        }
        flush()
        if parts.isEmpty { parts.append(.canvas(canvas: current, strokes: [], pointCount: 0)) }
        return parts
    }
}
