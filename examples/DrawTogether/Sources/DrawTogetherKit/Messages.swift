import HuddleKit

/// The activity: which canvas the group draws on. A reset sets a new one for everyone, as the
/// sample starts a new `DrawTogether` activity.
public struct DrawTogether: GroupActivity, Equatable {
    /// The canvas id (random, new at each reset).
    public var canvas: String
    /// The activity of canvas `canvas`.
    public init(canvas: String) { self.canvas = canvas }
}

/// A point on the canvas, in canvas units (1000 × 700, the SVG's user space); JSON `[x, y]`.
public struct Point: Codable, Sendable, Equatable {
    /// Rightwards from the left edge.
    public var x: Double
    /// Downwards from the top edge.
    public var y: Double
    /// The point (x, y).
    public init(x: Double, y: Double) { self.x = x; self.y = y }

    /// Decodes `[x, y]`; anything else, or a value that is not finite, is an error.
    public init(from decoder: any Decoder) throws {
        var c = try decoder.unkeyedContainer()
        x = try c.decode(Double.self)
        y = try c.decode(Double.self)
        guard x.isFinite, y.isFinite, c.isAtEnd else { throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a point [x, y]") }
    }

    /// Encodes `[x, y]`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.unkeyedContainer()
        try c.encode(x)
        try c.encode(y)
    }
}

/// One more point of a stroke, sent to everyone as the stroke is drawn (the sample's
/// `UpsertStrokeMessage`, with the point's `index` in its stroke and the `canvas` it belongs to,
/// so points merge by position whatever path they took: live or in a catch-up).
public struct UpsertStrokeMessage: Codable, Sendable, Equatable {
    public let canvas: String
    public let id: String
    public let color: String
    public let index: Int
    public let point: Point

    public init(canvas: String, id: String, color: String, index: Int, point: Point) {
        self.canvas = canvas; self.id = id; self.color = color; self.index = index; self.point = point
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        canvas = try c.decode(String.self, forKey: .canvas)
        id = try c.decode(String.self, forKey: .id)
        color = try c.decode(String.self, forKey: .color)
        index = try c.decode(Int.self, forKey: .index)
        point = try c.decode(Point.self, forKey: .point)
        guard (0..<Stroke.maxPoints).contains(index) else {
            throw DecodingError.dataCorruptedError(forKey: .index, in: c, debugDescription: "index \(index) out of range")
        }
    }
}

/// The catch-up a newcomer gets from each participant (the sample's `CanvasMessage`): strokes of
/// `canvas`, and how many points the sender's whole canvas holds. A large canvas comes in parts.
public struct CanvasMessage: Codable, Sendable, Equatable {
    public let canvas: String
    public let strokes: [Stroke]
    public let pointCount: Int
    public init(canvas: String, strokes: [Stroke], pointCount: Int) { self.canvas = canvas; self.strokes = strokes; self.pointCount = pointCount }
}

/// The metadata of an image in the journal: where it was dropped, on which canvas (the sample's
/// `ImageMetadataMessage`).
public struct ImageMetadataMessage: Codable, Sendable, Equatable {
    public let location: Point
    public let canvas: String
    public init(location: Point, canvas: String) { self.location = location; self.canvas = canvas }
}

/// One stroke: its color and its points by position (positions may have gaps while points are
/// still on their way; every replica of a stroke agrees on the point at each position).
/// JSON: `{"id", "color", "points": [[index, x, y], …]}`.
public struct Stroke: Codable, Sendable, Equatable {
    /// Most points a stroke may have.
    public static let maxPoints = 1_000_000
    public let id: String
    public var color: String
    public var points: [Int: Point]

    public init(id: String, color: String, points: [Int: Point] = [:]) {
        self.id = id; self.color = color; self.points = points
    }

    enum CodingKeys: String, CodingKey { case id, color, points }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        color = try c.decode(String.self, forKey: .color)
        var list = try c.nestedUnkeyedContainer(forKey: .points)
        points = [:]
        while !list.isAtEnd {
            var entry = try list.nestedUnkeyedContainer()
            let i = try entry.decode(Int.self), x = try entry.decode(Double.self), y = try entry.decode(Double.self)
            guard (0..<Self.maxPoints).contains(i), x.isFinite, y.isFinite, entry.isAtEnd else {
                throw DecodingError.dataCorruptedError(in: entry, debugDescription: "not a point [index, x, y]")
            }
            points[i] = Point(x: x, y: y)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(color, forKey: .color)
        var list = c.nestedUnkeyedContainer(forKey: .points)
        for (i, p) in points.sorted(by: { $0.key < $1.key }) {
            var entry = list.nestedUnkeyedContainer()
            try entry.encode(i); try entry.encode(p.x); try entry.encode(p.y)
        }
    }

    /// The points in order of position.
    public var orderedPoints: [Point] { points.sorted { $0.key < $1.key }.map(\.value) }
}
