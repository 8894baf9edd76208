import DrawTogetherKit
import Foundation
import HuddleKit

/// What a page shows, as the JSON `serve` pushes over its WebSocket: the current canvas, its
/// strokes and images, the participants, and this participant's color.
struct PageState: Encodable {
    struct Person: Encodable {
        let id: String
        let name: String
        let isLocal: Bool
        /// The color the participant draws with: known once it has drawn ("" before).
        let color: String
    }
    struct Line: Encodable {
        let id: String
        let color: String
        /// `[[x, y], …]` in canvas units, in order.
        let points: [[Double]]
    }
    struct Picture: Encodable {
        let id: String
        let x: Double
        let y: Double
        let width: Int
        let height: Int
        let url: String
    }

    let canvas: String
    let width: Int
    let height: Int
    let color: String
    let you: Person
    let participants: [Person]
    let strokes: [Line]
    let images: [Picture]
    let pointCount: Int

    static func of(_ canvas: Canvas) async -> PageState {
        let model = await canvas.model
        let me = await canvas.groupSession?.localParticipant
        let colors = await canvas.colors
        let people = await canvas.activeParticipants
            .map { Person(id: $0.id, name: $0.name.isEmpty ? $0.id : $0.name, isLocal: $0 == me,
                          color: $0 == me ? canvas.strokeColor : safeColor(colors[$0.id] ?? "")) }
            .sorted { ($0.isLocal ? 0 : 1, $0.name) < ($1.isLocal ? 0 : 1, $1.name) }
        return PageState(
            canvas: model.current, width: SVGRenderer.width, height: SVGRenderer.height, color: canvas.strokeColor,
            you: Person(id: me?.id ?? "", name: me?.name ?? "", isLocal: true, color: canvas.strokeColor), participants: people,
            strokes: model.strokes.map { Line(id: $0.id, color: safeColor($0.color), points: $0.orderedPoints.map { [$0.x, $0.y] }) },
            images: await canvas.images.map {
                Picture(id: $0.id, x: $0.location.x, y: $0.location.y, width: $0.displaySize.width, height: $0.displaySize.height,
                        url: "/attachment/\($0.id)")
            },
            pointCount: model.pointCount)
    }

    var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(self), as: UTF8.self)) ?? "{}"
    }
}

/// What a page sends over its WebSocket: `{"op":"point","stroke":ID,"x":X,"y":Y}` (one more point
/// of the stroke the pointer draws) or `{"op":"reset"}`.
struct PageCommand: Decodable {
    let op: String
    let stroke: String?
    let x: Double?
    let y: Double?
}

/// A color a peer chose, as the page may use it: `#rrggbb`, else grey (it goes into the page's
/// styles and drawing calls: never a string a peer made up).
func safeColor(_ color: String) -> String {
    color.isEmpty || ScriptStep.isColor(color) ? color : "#888888"
}
