import DrawTogetherKit
import Foundation
import Testing

/// `value` through JSON and back, as a message travels (HuddleKit encodes with JSONEncoder).
private func roundTrip<T: Codable>(_ value: T) throws -> T {
    try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value))
}

struct CanvasModelTests {
    private func upsert(_ canvas: String = "", id: String, _ index: Int, _ x: Double, color: String = "#000000") -> UpsertStrokeMessage {
        UpsertStrokeMessage(canvas: canvas, id: id, color: color, index: index, point: Point(x: x, y: x))
    }

    @Test func pointsAppendToTheirStrokeByIdAndRoundTripAsJSON() throws {
        var model = CanvasModel()
        for i in 0..<3 { model.handle(try roundTrip(upsert(id: "s1", i, Double(i)))) }
        model.handle(try roundTrip(upsert(id: "s2", 0, 9)))
        #expect(model.strokes.map(\.id) == ["s1", "s2"])
        #expect(model.pointCount == 4)
        #expect(model.strokes[0].points[2] == Point(x: 2, y: 2))
    }

    @Test func aCatchUpAddsWhatIsMissingAndNeverDropsLivePoints() {
        // The late joiner got points 5…9 of s1 live; a catch-up holds 0…7 (its sender had not seen 8, 9).
        var joiner = CanvasModel()
        for i in 5..<10 { joiner.handle(upsert(id: "s1", i, Double(i))) }
        var sender = CanvasModel()
        for i in 0..<8 { sender.handle(upsert(id: "s1", i, Double(i))) }
        for part in sender.catchUp() { joiner.handle(part) }
        #expect(joiner.pointCount == 10)
        #expect(joiner.bestCatchUp == 8)
        // An older, smaller catch-up changes nothing.
        var older = CanvasModel()
        for i in 0..<3 { older.handle(upsert(id: "s1", i, Double(i))) }
        for part in older.catchUp() { joiner.handle(part) }
        #expect(joiner.pointCount == 10)
        #expect(joiner.bestCatchUp == 8)
    }

    @Test func catchUpsOfALargeCanvasStayUnderTheMessageLimitAndRebuildIt() throws {
        var big = CanvasModel()
        for s in 0..<20 { for i in 0..<600 { big.handle(upsert(id: "s\(s)", i, Double(i))) } }
        let parts = big.catchUp()
        #expect(parts.count > 1)
        // The envelope HuddleKit wraps around a message adds well under 1 KiB.
        for part in parts { #expect(try JSONEncoder().encode(part).count < 63 * 1024) }
        var rebuilt = CanvasModel()
        for part in parts { rebuilt.handle(try roundTrip(part)) }
        #expect(rebuilt.pointCount == 12_000)
        #expect(SVGRenderer.render(rebuilt, images: []) == SVGRenderer.render(big, images: []))
    }

    @Test func theSameStrokesInAnyOrderRenderTheSameBytes() {
        let messages = (0..<5).flatMap { s in (0..<7).map { i in upsert(id: "s\(s)", i, Double(s * 10 + i), color: "#12ab\(s)0") } }
        var forward = CanvasModel(), backward = CanvasModel()
        for m in messages { forward.handle(m) }
        for m in messages.reversed() { backward.handle(m) }
        let image = CanvasImage(id: "i1", location: Point(x: 5, y: 5), bytes: [1, 2, 3])
        #expect(SVGRenderer.render(forward, images: [image]) == SVGRenderer.render(backward, images: [image]))
    }

    @Test func resetShowsOnlyTheNewCanvasAndIgnoresStrokesOfTheOldOne() {
        var model = CanvasModel()
        model.handle(upsert(id: "old", 0, 1))
        model.setActivity(DrawTogether(canvas: "c2"))
        #expect(model.current == "c2")
        #expect(model.pointCount == 0)
        model.handle(upsert("c2", id: "new", 0, 1))
        model.handle(upsert(id: "old", 1, 2)) // a late point of the old canvas
        #expect(model.strokes.map(\.id) == ["new"])
        #expect(SVGRenderer.render(model, images: []).contains("stroke-old") == false)
    }

    @Test func malformedMessagesDoNotDecodeSoTheMessengerSkipsThemAndTheCanvasIsUntouched() throws {
        // GroupSessionMessenger.messages(of:) yields only what decodes as the type; an unknown type
        // never reaches it (HuddleKitTests check the envelope); these bodies are what a newer or broken
        // participant could send as an UpsertStrokeMessage.
        let bodies = [
            ##"{"canvas":"","id":"x","color":"#000000","index":-1,"point":[1,1]}"##,
            ##"{"canvas":"","id":"x","color":"#000000","index":0,"point":[1]}"##,
            ##"{"canvas":"","id":"x","color":"#000000","index":0,"point":[1,2,3]}"##,
            ##"{"canvas":"","id":"x","color":"#000000","index":2000000,"point":[1,1]}"##,
            ##"{"canvas":"","id":"x","index":0,"point":[1,1]}"##,
            "hello, not json",
        ]
        for body in bodies {
            #expect(throws: (any Error).self, "\(body)") { try JSONDecoder().decode(UpsertStrokeMessage.self, from: Data(body.utf8)) }
        }
        #expect(throws: (any Error).self) {
            try JSONDecoder().decode(CanvasMessage.self, from: Data(##"{"canvas":"","pointCount":1,"strokes":[{"id":"a","color":"#000000","points":[[-1,0,0]]}]}"##.utf8))
        }
        let valid = try JSONDecoder().decode(UpsertStrokeMessage.self, from: Data(##"{"canvas":"","id":"x","color":"#000000","index":0,"point":[1,1]}"##.utf8))
        var model = CanvasModel()
        model.handle(valid)
        #expect(model.pointCount == 1)
    }

    @Test func scriptsParseEveryStepAndReportTheLineOfAnError() throws {
        let steps = try ScriptStep.parse("""
            color #A0b0c0   # mine
            stroke 1,2 3.5,4
            image /tmp/x.png 10,20
            wait members 3
            wait points 10
            wait images 1
            sleep 50

            reset
            render /tmp/out.svg
            leave
            """)
        #expect(steps == [.color("#a0b0c0"), .stroke([Point(x: 1, y: 2), Point(x: 3.5, y: 4)]), .image(path: "/tmp/x.png", at: Point(x: 10, y: 20)),
                          .waitMembers(3), .waitPoints(10), .waitImages(1), .sleep(milliseconds: 50), .reset, .render(path: "/tmp/out.svg"), .leave])
        #expect(throws: ScriptStep.ParseError.self) { try ScriptStep.parse("stroke 1,2\nstroke 1;2") }
        do { _ = try ScriptStep.parse("stroke 1,2\nfly away") } catch { #expect(error.line == 2) }
    }
}
