import DrawTogetherKit
import HuddleControl
import Testing

struct CanvasModelTests {
    private func upsert(_ canvas: String = "", id: String, _ index: Int, _ x: Double, color: String = "#000000") -> DrawMessage {
        .upsertStroke(canvas: canvas, id: id, color: color, index: index, point: Point(x: x, y: x))
    }

    @Test func pointsAppendToTheirStrokeByIdAndRoundTripAsText() throws {
        var model = CanvasModel()
        for i in 0..<3 { model.apply(text: upsert(id: "s1", i, Double(i)).text) }
        model.apply(text: upsert(id: "s2", 0, 9).text)
        #expect(model.strokes.map(\.id) == ["s1", "s2"])
        #expect(model.pointCount == 4)
        #expect(model.strokes[0].points[2] == Point(x: 2, y: 2))
    }

    @Test func aCatchUpAddsWhatIsMissingAndNeverDropsLivePoints() {
        // The late joiner got points 5…9 of s1 live; a catch-up holds 0…7 (its sender had not seen 8, 9).
        var joiner = CanvasModel()
        for i in 5..<10 { joiner.apply(upsert(id: "s1", i, Double(i))) }
        var sender = CanvasModel()
        for i in 0..<8 { sender.apply(upsert(id: "s1", i, Double(i))) }
        for part in sender.catchUp() { joiner.apply(part) }
        #expect(joiner.pointCount == 10)
        #expect(joiner.bestCatchUp == 8)
        // An older, smaller catch-up changes nothing.
        var older = CanvasModel()
        for i in 0..<3 { older.apply(upsert(id: "s1", i, Double(i))) }
        for part in older.catchUp() { joiner.apply(part) }
        #expect(joiner.pointCount == 10)
        #expect(joiner.bestCatchUp == 8)
    }

    @Test func catchUpsOfALargeCanvasStayUnderTheMessageLimitAndRebuildIt() {
        var big = CanvasModel()
        for s in 0..<20 { for i in 0..<600 { big.apply(upsert(id: "s\(s)", i, Double(i))) } }
        let parts = big.catchUp()
        #expect(parts.count > 1)
        for part in parts { #expect(part.text.utf8.count < 64 * 1024) }
        var rebuilt = CanvasModel()
        for part in parts { rebuilt.apply(text: part.text) }
        #expect(rebuilt.pointCount == 12_000)
        #expect(SVGRenderer.render(rebuilt, images: []) == SVGRenderer.render(big, images: []))
    }

    @Test func theSameStrokesInAnyOrderRenderTheSameBytes() {
        let messages = (0..<5).flatMap { s in (0..<7).map { i in upsert(id: "s\(s)", i, Double(s * 10 + i), color: "#12ab\(s)0") } }
        var forward = CanvasModel(), backward = CanvasModel()
        for m in messages { forward.apply(m) }
        for m in messages.reversed() { backward.apply(m) }
        let image = CanvasImage(id: "i1", location: Point(x: 5, y: 5), bytes: [1, 2, 3])
        #expect(SVGRenderer.render(forward, images: [image]) == SVGRenderer.render(backward, images: [image]))
    }

    @Test func resetShowsOnlyTheNewCanvasAndIgnoresStrokesOfTheOldOne() {
        var model = CanvasModel()
        model.apply(upsert(id: "old", 0, 1))
        model.setActivity(CanvasModel.activity(canvas: "c2"))
        #expect(model.current == "c2")
        #expect(model.pointCount == 0)
        model.apply(upsert("c2", id: "new", 0, 1))
        model.apply(upsert(id: "old", 1, 2)) // a late point of the old canvas
        #expect(model.strokes.map(\.id) == ["new"])
        #expect(SVGRenderer.render(model, images: []).contains("stroke-old") == false)
    }

    @Test func aNewerProtocolVersionOrAnUnknownMessageIsIgnoredNotFatal() {
        var model = CanvasModel()
        let bodies = [
            ##"{"v":2,"type":"upsertStroke","canvas":"","id":"x","color":"#000000","index":0,"point":[1,1]}"##,
            ##"{"v":1,"type":"wave","canvas":""}"##,
            "hello, not json",
            ##"{"v":1,"type":"upsertStroke","canvas":"","id":"x","color":"#000000","index":-1,"point":[1,1]}"##,
        ]
        for body in bodies {
            let applied = model.apply(text: body)
            #expect(!applied, "\(body)")
        }
        #expect(model.ignored == 4)
        #expect(model.pointCount == 0)
        let valid = model.apply(text: upsert(id: "x", 0, 1).text)
        #expect(valid)
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
