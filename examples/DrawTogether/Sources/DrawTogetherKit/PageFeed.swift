/// One change a page applies to what it shows (JSON with a `type`):
/// - `snapshot`: the whole canvas (`PageState`), when the WebSocket opens and when the canvas is reset;
/// - `points`: `{stroke, color, replace, points: [[x, y], …]}` — points to append to a stroke (a new
///   stroke when the id is new), or with `replace` its whole list (a gap was filled);
/// - `image` `{image: {id, x, y, width, height, url}}` and `imageGone` `{id}`;
/// - `participants` `{participants}` and `cursors` `{cursors}`: those (short) lists whole.
public enum PageMessage: Encodable, Sendable, Equatable {
    case snapshot(PageState)
    case points(stroke: String, color: String, replace: Bool, points: [[Double]])
    case image(PageState.Picture)
    case imageGone(String)
    case participants([PageState.Person])
    case cursors([PageState.Cursor])

    enum CodingKeys: String, CodingKey { case type, stroke, color, replace, points, image, id, participants, cursors }

    public func encode(to encoder: any Encoder) throws {
        if case let .snapshot(state) = self { return try state.encode(to: encoder) }
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .snapshot: break
        case let .points(stroke, color, replace, points):
            try c.encode("points", forKey: .type)
            try c.encode(stroke, forKey: .stroke); try c.encode(color, forKey: .color)
            try c.encode(replace, forKey: .replace); try c.encode(points, forKey: .points)
        case let .image(picture):
            try c.encode("image", forKey: .type); try c.encode(picture, forKey: .image)
        case let .imageGone(id):
            try c.encode("imageGone", forKey: .type); try c.encode(id, forKey: .id)
        case let .participants(people):
            try c.encode("participants", forKey: .type); try c.encode(people, forKey: .participants)
        case let .cursors(cursors):
            try c.encode("cursors", forKey: .type); try c.encode(cursors, forKey: .cursors)
        }
    }

    /// A batch of messages as one JSON array (one WebSocket frame).
    public static func json(_ batch: [PageMessage]) -> String { jsonText(batch) }
}

/// What one page has been sent, and the messages that bring it up to date with a `PageView`.
///
/// Guarantees: the first update is a snapshot, and so is the first after the canvas changed;
/// otherwise only what changed is sent — a stroke's new points (its points are never removed
/// within a canvas, so a stroke whose count did not change is skipped without looking at its
/// points), images added and gone, and the participant and pointer lists when they differ. A page
/// that applies every batch in order shows what the last view showed.
public struct PageFeed: Sendable {
    private var canvas: String?
    /// Per stroke: how many points were sent, and the highest position among them.
    private var strokes: [String: (count: Int, last: Int)] = [:]
    private var images: Set<String> = []
    private var participants: [PageState.Person] = []
    private var cursors: [PageState.Cursor] = []

    public init() {}

    /// The messages that bring the page from what it was sent to `view`.
    public mutating func update(to view: PageView) -> [PageMessage] {
        guard canvas == view.model.current else {
            canvas = view.model.current
            strokes = [:]
            for stroke in (view.model.canvases[view.model.current] ?? [:]).values {
                strokes[stroke.id] = (count: stroke.points.count, last: stroke.points.keys.max() ?? -1)
            }
            images = Set(view.images.map(\.id))
            participants = view.participants
            cursors = view.cursors
            return [.snapshot(PageState(view))]
        }
        var out: [PageMessage] = []
        for stroke in (view.model.canvases[view.model.current] ?? [:]).values.sorted(by: { $0.id < $1.id }) {
            let sent = strokes[stroke.id] ?? (count: 0, last: -1)
            guard stroke.points.count != sent.count else { continue }
            let keys = stroke.points.keys.sorted()
            // Appending is enough when the positions sent are still the first ones (none filled a gap before them).
            let appends = sent.count == 0 || (sent.count <= keys.count && keys[sent.count - 1] == sent.last)
            let new = appends ? keys[sent.count...] : keys[...]
            out.append(.points(stroke: stroke.id, color: safeColor(stroke.color), replace: !appends,
                               points: new.compactMap { stroke.points[$0].map { [$0.x, $0.y] } }))
            strokes[stroke.id] = (count: keys.count, last: keys.last ?? -1)
        }
        let shown = Set(view.images.map(\.id))
        for image in view.images where !images.contains(image.id) { out.append(.image(PageState.Picture(image))) }
        for id in images.subtracting(shown).sorted() { out.append(.imageGone(id)) }
        images = shown
        if view.participants != participants {
            participants = view.participants
            out.append(.participants(participants))
        }
        if view.cursors != cursors {
            cursors = view.cursors
            out.append(.cursors(cursors))
        }
        return out
    }
}
