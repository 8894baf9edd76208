/// The shared canvas as one participant sees it: the strokes of every canvas (one per reset) and
/// which canvas is current. A pure value: `Canvas` feeds it what the session delivers.
///
/// Guarantees: applying the same set of messages in any order gives the same state (points merge
/// by (stroke, index)), and catch-ups only add what is missing — so every participant that has
/// received the same strokes, live or through catch-ups, shows the same canvas. Messages for a
/// canvas that is not current are kept (a concurrent reset may still make it current) but not shown.
public struct CanvasModel: Sendable {
    /// Strokes by canvas id, then by stroke id.
    public private(set) var canvases: [String: [String: Stroke]] = [:]
    /// The canvas being shown: the activity's `canvas` ("" before any reset).
    public private(set) var current = ""
    /// The largest `pointCount` any catch-up claimed for the current canvas.
    public private(set) var bestCatchUp = 0

    public init() {}

    /// The strokes of the current canvas, by id.
    public var strokes: [Stroke] { (canvases[current] ?? [:]).values.sorted { $0.id < $1.id } }
    /// How many points the current canvas shows (the sample's `pointCount`).
    public var pointCount: Int { (canvases[current] ?? [:]).values.reduce(0) { $0 + $1.points.count } }

    /// One point of a stroke, from anyone (this participant included).
    public mutating func handle(_ message: UpsertStrokeMessage) {
        canvases[message.canvas, default: [:]][message.id, default: Stroke(id: message.id, color: message.color)].points[message.index] = message.point
    }

    /// A catch-up. The sample keeps the catch-up with the highest `pointCount`; here every part
    /// merges by (stroke, index), which keeps everything the highest one has and loses nothing a
    /// lower one had (a point its sender had not seen yet).
    public mutating func handle(_ message: CanvasMessage) {
        if message.canvas == current { bestCatchUp = max(bestCatchUp, message.pointCount) }
        for stroke in message.strokes {
            var mine = canvases[message.canvas, default: [:]][stroke.id] ?? Stroke(id: stroke.id, color: stroke.color)
            mine.points.merge(stroke.points) { have, _ in have }
            canvases[message.canvas, default: [:]][stroke.id] = mine
        }
    }

    /// The activity changed: its canvas becomes current ("" when none is set).
    public mutating func setActivity(_ activity: DrawTogether?) {
        let canvas = activity?.canvas ?? ""
        if canvas != current { bestCatchUp = 0 }
        current = canvas
    }

    /// The current canvas as catch-up messages for a newcomer, each part about `maxBytes` of JSON at most.
    public func catchUp(maxBytes: Int = 48 * 1024) -> [CanvasMessage] {
        let total = pointCount
        var parts: [CanvasMessage] = []
        var batch: [Stroke] = []
        var bytes = 0
        func flush() {
            if !batch.isEmpty { parts.append(CanvasMessage(canvas: current, strokes: batch, pointCount: total)) }
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
        if parts.isEmpty { parts.append(CanvasMessage(canvas: current, strokes: [], pointCount: 0)) }
        return parts
    }
}
