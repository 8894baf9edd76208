import HuddleControl

/// A point on the canvas, in canvas units (the SVG's user space).
public struct Point: Sendable, Equatable {
    public var x: Double
    public var y: Double
    public init(x: Double, y: Double) { self.x = x; self.y = y }
}

/// What DrawTogether participants say to each other, as JSON text in Huddle messages.
///
/// Every message carries `v` (the protocol version). A participant applies versions it knows
/// (≤ `DrawMessage.version`) and ignores newer ones and unknown types without failing, so an older
/// participant keeps drawing in a session with newer ones.
public enum DrawMessage: Sendable, Equatable {
    /// One more point of stroke `id` (reliable broadcast). `index` is the point's position in its
    /// stroke, so points merge by position whatever path they took (live or in a catch-up).
    case upsertStroke(canvas: String, id: String, color: String, index: Int, point: Point)
    /// A catch-up for a late joiner (directed send): some strokes of `canvas`, and how many points
    /// the sender's whole canvas holds. A large canvas is sent as several parts.
    case canvas(canvas: String, strokes: [Stroke], pointCount: Int)

    /// The protocol version this build speaks.
    public static let version: Int64 = 1

    /// Why an incoming body was not applied.
    public enum Rejection: Error, Equatable, Sendable {
        case notJSON
        case newerVersion(Int64)
        case unknownType(String)
        case malformed(String)
    }

    public var json: JSONObject {
        switch self {
        case let .upsertStroke(canvas, id, color, index, point):
            return ["v": .int(Self.version), "type": "upsertStroke", "canvas": .string(canvas), "id": .string(id),
                    "color": .string(color), "index": .int(Int64(index)), "point": [.double(point.x), .double(point.y)]]
        case let .canvas(canvas, strokes, pointCount):
            return ["v": .int(Self.version), "type": "canvas", "canvas": .string(canvas),
                    "strokes": .array(strokes.map { .object($0.json) }), "pointCount": .int(Int64(pointCount))]
        }
    }

    /// The message as the text of a Huddle `send`.
    public var text: String { JSON.object(json).serialized }

    public static func decode(_ text: String) throws(Rejection) -> DrawMessage {
        guard case let .object(o)? = try? JSON.parse(text) else { throw .notJSON }
        guard let v = o["v"]?.intValue else { throw .malformed("no version") }
        if v > version { throw .newerVersion(v) }
        let type = o["type"]?.stringValue ?? ""
        guard let canvas = o["canvas"]?.stringValue else { throw .malformed("no canvas") }
        switch type {
        case "upsertStroke":
            guard let id = o["id"]?.stringValue, let color = o["color"]?.stringValue,
                  let index = o["index"]?.intValue, index >= 0, index < 1_000_000,
                  let point = Self.point(o["point"]) else { throw .malformed("upsertStroke") }
            return .upsertStroke(canvas: canvas, id: id, color: color, index: Int(index), point: point)
        case "canvas":
            guard let list = o["strokes"]?.arrayValue, let count = o["pointCount"]?.intValue else { throw .malformed("canvas") }
            var strokes: [Stroke] = []
            for item in list {
                guard let s = item.objectValue, let stroke = Stroke(json: s) else { throw .malformed("canvas stroke") }
                strokes.append(stroke)
            }
            return .canvas(canvas: canvas, strokes: strokes, pointCount: Int(count))
        default:
            throw .unknownType(type)
        }
    }

    static func number(_ json: JSON?) -> Double? {
        switch json {
        case let .double(d)?: d.isFinite ? d : nil
        case let .int(i)?: Double(i)
        default: nil
        }
    }

    static func point(_ json: JSON?) -> Point? {
        guard let a = json?.arrayValue, a.count == 2, let x = number(a[0]), let y = number(a[1]) else { return nil }
        return Point(x: x, y: y)
    }
}

/// One stroke: its color and its points by position (positions may have gaps while points are
/// still on their way; every replica of a stroke agrees on the point at each position).
public struct Stroke: Sendable, Equatable {
    public let id: String
    public var color: String
    public var points: [Int: Point]

    public init(id: String, color: String, points: [Int: Point] = [:]) {
        self.id = id; self.color = color; self.points = points
    }

    var json: JSONObject {
        ["id": .string(id), "color": .string(color),
         "points": .array(points.sorted { $0.key < $1.key }.map { [.int(Int64($0.key)), .double($0.value.x), .double($0.value.y)] })]
    }

    init?(json o: JSONObject) {
        guard let id = o["id"]?.stringValue, let color = o["color"]?.stringValue, let list = o["points"]?.arrayValue else { return nil }
        var points: [Int: Point] = [:]
        for entry in list {
            guard let a = entry.arrayValue, a.count == 3, let i = a[0].intValue, i >= 0, i < 1_000_000,
                  let x = DrawMessage.number(a[1]), let y = DrawMessage.number(a[2]) else { return nil }
            points[Int(i)] = Point(x: x, y: y)
        }
        self.init(id: id, color: color, points: points)
    }
}
