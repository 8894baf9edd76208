import Foundation
import HuddleKit

/// What a page shows at one moment, gathered from `Canvas` in one step: the current canvas, its
/// strokes and images, the participants, their pointers, and this participant's color.
public struct PageView: Sendable {
    public let model: CanvasModel
    /// The images of the current canvas that are images (`ImageFormat`), by id.
    public let images: [CanvasImage]
    public let color: String
    public let you: PageState.Person
    /// This participant first, then the others by name.
    public let participants: [PageState.Person]
    /// The other participants' pointers, by participant id.
    public let cursors: [PageState.Cursor]
}

/// The whole canvas as the JSON a page gets when its WebSocket opens (`"type": "snapshot"`), and
/// again only when the canvas itself changes (a reset); every other change reaches it as a
/// `PageMessage` (`PageFeed`). Colors are `#rrggbb` or "" (`safeColor`): never a string a peer made up.
public struct PageState: Encodable, Sendable, Equatable {
    public struct Person: Encodable, Sendable, Equatable {
        let id: String
        let name: String
        let isLocal: Bool
        /// The color the participant draws with: known once it has drawn ("" before).
        let color: String
    }
    public struct Line: Encodable, Sendable, Equatable {
        let id: String
        let color: String
        /// `[[x, y], …]` in canvas units, in order.
        let points: [[Double]]
    }
    /// An image, centred on (x, y), shown `width` × `height` (its aspect ratio, fitted: `ImageFormat.fitted`).
    public struct Picture: Encodable, Sendable, Equatable {
        let id: String
        let x: Double
        let y: Double
        let width: Int
        let height: Int
        let url: String
    }
    /// Another participant's pointer.
    public struct Cursor: Encodable, Sendable, Equatable {
        let id: String
        let name: String
        let color: String
        let x: Double
        let y: Double
    }

    let type = "snapshot"
    let canvas: String
    let width: Int
    let height: Int
    let color: String
    let you: Person
    let participants: [Person]
    let strokes: [Line]
    let images: [Picture]
    let cursors: [Cursor]
    let pointCount: Int

    /// The snapshot of `view`.
    public init(_ view: PageView) {
        canvas = view.model.current; width = SVGRenderer.width; height = SVGRenderer.height
        color = view.color; you = view.you; participants = view.participants; cursors = view.cursors
        strokes = view.model.strokes.map { Line(id: $0.id, color: safeColor($0.color), points: $0.orderedPoints.map { [$0.x, $0.y] }) }
        images = view.images.map { Picture($0) }
        pointCount = view.model.pointCount
    }

    /// The snapshot as JSON.
    public var json: String { jsonText(self) }
}

extension PageState.Picture {
    /// How the page shows `image` (an image of an accepted kind; others are not shown).
    init(_ image: CanvasImage) {
        let size = image.format?.fitted() ?? (width: 1, height: 1)
        self.init(id: image.id, x: image.location.x, y: image.location.y, width: size.width, height: size.height,
                  url: "/attachment/\(image.id)")
    }
}

extension Canvas {
    /// What a page shows now.
    public func pageView(now: ContinuousClock.Instant = .now) -> PageView {
        let me = groupSession?.localParticipant
        let people = activeParticipants
            .map { PageState.Person(id: $0.id, name: $0.name.isEmpty ? $0.id : $0.name, isLocal: $0 == me,
                                    color: $0 == me ? strokeColor : safeColor(colors[$0.id] ?? "")) }
            .sorted { ($0.isLocal ? 0 : 1, $0.name, $0.id) < ($1.isLocal ? 0 : 1, $1.name, $1.id) }
        let others = Dictionary(people.filter { !$0.isLocal }.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let cursors = cursorTable.visible(present: Set(others.keys), now: now)
            .compactMap { id, p in others[id].map { PageState.Cursor(id: id, name: $0.name, color: $0.color, x: p.x, y: p.y) } }
            .sorted { $0.id < $1.id }
        return PageView(model: model, images: images.filter { $0.format != nil }, color: strokeColor,
                        you: PageState.Person(id: me?.id ?? "", name: me?.name ?? "", isLocal: true, color: strokeColor),
                        participants: people, cursors: cursors)
    }
}

/// `value` as compact JSON with sorted keys ("{}" if it cannot be encoded).
func jsonText<T: Encodable>(_ value: T) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? "{}"
}

/// A color a peer chose, as the page may use it: `#rrggbb`, else grey (it goes into the page's
/// styles and drawing calls: never a string a peer made up).
public func safeColor(_ color: String) -> String {
    color.isEmpty || ScriptStep.isColor(color) ? color : "#888888"
}
