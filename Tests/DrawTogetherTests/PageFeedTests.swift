@testable import DrawTogetherKit
import Foundation
import Testing

/// `PageFeed`: a page gets the whole canvas once, then only what changed.
struct PageFeedTests {
    private let ann = PageState.Person(id: "a1", name: "ann", isLocal: true, color: "#e6194b")
    private let ben = PageState.Person(id: "b1", name: "ben", isLocal: false, color: "#3cb44b")

    private func view(_ model: CanvasModel, images: [CanvasImage] = [], people: [PageState.Person]? = nil, cursors: [PageState.Cursor] = []) -> PageView {
        PageView(model: model, images: images, color: "#e6194b", you: ann, participants: people ?? [ann, ben], cursors: cursors)
    }

    private func point(_ model: inout CanvasModel, _ stroke: String, _ index: Int, canvas: String = "") {
        model.handle(UpsertStrokeMessage(canvas: canvas, id: stroke, color: "#3cb44b", index: index, point: Point(x: Double(index), y: 1)))
    }

    @Test func theFirstUpdateIsASnapshotThenOnlyNewPointsGo() throws {
        var model = CanvasModel()
        for i in 0..<100 { point(&model, "s1", i) }
        var feed = PageFeed()
        let first = feed.update(to: view(model))
        guard case let .snapshot(state) = try #require(first.first) else { Issue.record("not a snapshot: \(first)"); return }
        #expect(first.count == 1 && state.strokes.first?.points.count == 100)
        #expect(feed.update(to: view(model)).isEmpty, "nothing changed, nothing sent")
        point(&model, "s1", 100)
        point(&model, "s2", 0)
        #expect(feed.update(to: view(model)) == [
            .points(stroke: "s1", color: "#3cb44b", replace: false, points: [[100, 1]]),
            .points(stroke: "s2", color: "#3cb44b", replace: false, points: [[0, 1]]),
        ])
        let json = PageMessage.json(feed.update(to: view(model)) + [.points(stroke: "s1", color: "#3cb44b", replace: false, points: [[100, 1]])])
        #expect(json.count < 100, "an appended point is a short message, not the canvas: \(json)")
    }

    @Test func aFilledGapReplacesTheStrokeAndAResetIsASnapshot() {
        var model = CanvasModel()
        point(&model, "s1", 0); point(&model, "s1", 2)
        var feed = PageFeed()
        _ = feed.update(to: view(model))
        point(&model, "s1", 1)  // arrived late: it goes between the two the page has
        #expect(feed.update(to: view(model)) == [.points(stroke: "s1", color: "#3cb44b", replace: true, points: [[0, 1], [1, 1], [2, 1]])])
        model.setActivity(DrawTogether(canvas: "fresh"))
        let after = feed.update(to: view(model))
        guard case .snapshot = after.first else { Issue.record("a reset is not a snapshot: \(after)"); return }
    }

    @Test func imagesParticipantsAndPointersGoWhenTheyChange() {
        let model = CanvasModel()
        var feed = PageFeed()
        _ = feed.update(to: view(model))
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8) + [0, 0, 1, 0xE0, 0, 0, 0, 0xF0]
        let image = CanvasImage(id: "i1", location: Point(x: 500, y: 350), bytes: png)
        #expect(feed.update(to: view(model, images: [image])) == [
            .image(PageState.Picture(id: "i1", x: 500, y: 350, width: 300, height: 150, url: "/attachment/i1")),
        ])
        let cursor = PageState.Cursor(id: "b1", name: "ben", color: "#3cb44b", x: 5, y: 6)
        #expect(feed.update(to: view(model, images: [image], cursors: [cursor])) == [.cursors([cursor])])
        #expect(feed.update(to: view(model, people: [ann], cursors: [])) == [.imageGone("i1"), .participants([ann]), .cursors([])])
    }

    @Test func aColorAPeerMadeUpNeverReachesThePage() {
        var model = CanvasModel()
        let evil = "red;background:url(//evil.example/x)"
        model.handle(UpsertStrokeMessage(canvas: "", id: "s1", color: evil, index: 0, point: Point(x: 1, y: 1)))
        var feed = PageFeed()
        let first = feed.update(to: view(model))
        guard case let .snapshot(state) = first.first else { Issue.record("not a snapshot: \(first)"); return }
        #expect(state.strokes.map(\.color) == ["#888888"])
        model.handle(UpsertStrokeMessage(canvas: "", id: "s1", color: evil, index: 1, point: Point(x: 2, y: 2)))
        #expect(feed.update(to: view(model)) == [.points(stroke: "s1", color: "#888888", replace: false, points: [[2, 2]])])
        #expect(!PageMessage.json(feed.update(to: view(model)) + first).contains("evil"))
    }
}
