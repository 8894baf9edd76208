import Testing
@testable import HuddleControl

@Test func valuesRoundTripAndKeepKeyOrder() throws {
    let value: JSON = ["z": 1, "a": [true, false, nil, 1.5, -7, "x\"y\\\n\u{1}é😀"], "m": ["k": .object(JSONObject())]]
    let text = value.serialized
    #expect(text == #"{"z":1,"a":[true,false,null,1.5,-7,"x\"y\\\n\u0001é😀"],"m":{"k":{}}}"#)
    #expect(try JSON.parse(text) == value)
}

@Test func integersStayIntegersAndDoublesRoundTrip() throws {
    #expect(try JSON.parse("9007199254740993") == .int(9_007_199_254_740_993))
    #expect(try JSON.parse("-0.25e2") == .double(-25))
    #expect(throws: ControlError.self) { try JSON.parse("1e400") }
    #expect(JSON.double(.infinity).serialized == "null")
    #expect(JSON.double(2.5).intValue == nil && JSON.double(3).intValue == 3)
}

@Test func escapesAndSurrogatesParse() throws {
    #expect(try JSON.parse(#""\ud83d\ude00 \u00e9 \/""#) == .string("😀 é /"))
    #expect(throws: ControlError.self) { try JSON.parse(#""\ud83d""#) }
    #expect(throws: ControlError.self) { try JSON.parse(#""\x""#) }
}

@Test(arguments: ["", " ", "{", "[1,", "{\"a\"}", "{\"a\":}", "tru", "01", "1.", "-", "\"abc", "[1] 2", "{\"a\":1,}", "\u{0}", "nul"])
func malformedDocumentsAreErrors(text: String) {
    #expect(throws: ControlError.self) { try JSON.parse(text) }
}

@Test func deepNestingIsRefusedNotAStackOverflow() {
    #expect(throws: ControlError.self) { try JSON.parse(String(repeating: "[", count: 100_000)) }
    #expect((try? JSON.parse(String(repeating: "[", count: 60) + String(repeating: "]", count: 60))) != nil)
}

@Test func randomBytesAndTruncationsNeverTrap() {
    var rng = SystemRandomNumberGenerator()
    let valid = Array(#"{"op":"send","id":[1,2.5,{"x":null}],"text":"h\u00e9llo"}"#.utf8)
    for cut in 0..<valid.count { _ = try? JSON.parse(valid[..<cut]) }
    for _ in 0..<2000 {
        let bytes = (0..<Int.random(in: 0..<64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        _ = try? JSON.parse(bytes)
    }
    let invalidUTF8: [UInt8] = [0x22, 0xFF, 0xFE, 0x22]
    #expect(throws: ControlError.self) { try JSON.parse(invalidUTF8) }
}

@Test func aLargeStringParses() throws {
    let big = String(repeating: "a", count: 1 << 20)
    #expect(try JSON.parse("\"\(big)\"") == .string(big))
}

@Test func controlPathFollowsTheDocumentedOrder() {
    #expect(ControlPath.resolve("/x.sock", environment: ["HUDDLE_CONTROL": "/y"]) == "/x.sock")
    #expect(ControlPath.resolve(nil, environment: ["HUDDLE_CONTROL": "/y", "XDG_RUNTIME_DIR": "/run/u"]) == "/y")
    #expect(ControlPath.resolve(nil, environment: ["XDG_RUNTIME_DIR": "/run/u"]) == "/run/u/huddle.sock")
    #expect(ControlPath.resolve(nil, environment: [:]).hasPrefix("/tmp/huddle-"))
}

@Test func repliesHaveTheDocumentedShape() {
    #expect(JSON.object(ControlReply.ok(id: 3, ["x": 1])).serialized == #"{"id":3,"ok":true,"x":1}"#)
    #expect(JSON.object(ControlReply.error(id: nil, ControlError(.tooLarge, "m"))).serialized
        == #"{"id":null,"ok":false,"error":{"code":"too_large","message":"m"}}"#)
}

@Test func aClientOfAMissingSocketSaysNoNode() async {
    let path = "/tmp/huddle-no-such-\(UInt64.random(in: 0...UInt64.max)).sock"
    do {
        _ = try await ControlClient.connect(path: path)
        Issue.record("connected to \(path)")
    } catch {
        #expect(error.code == .noNode(path: path) && error.code.wire == nil)
        #expect("\(error)" == "no node is running at \(path)")
    }
}

@Test func onlyTheProtocolsCodesGoOnTheWire() {
    #expect(ControlError.Code.wireCodes.map(\.wire) == ["bad_request", "not_found", "too_large", "busy", "unavailable", "timeout", "io_error", "not_member", "internal"])
    for code in ControlError.Code.wireCodes { #expect(ControlError.Code(wire: code.wire ?? "") == code) }
    #expect(ControlError.Code(wire: "closed") == nil)
    #expect("\(ControlError(.busy, "m"))" == "busy: m")
    let local: [ControlError] = [.closed, .badReply("x"), .noNode(path: "/p"), ControlError(.untrustedPath, "u"), ControlError(.notJSON, "j")]
    for error in local {
        #expect(error.code.wire == nil)
        #expect(JSON.object(ControlReply.error(id: 1, error)).serialized
            == #"{"id":1,"ok":false,"error":{"code":"internal","message":"\#(error.message)"}}"#)
    }
    #expect("\(ControlError.closed)" == "the node closed the control connection")
    #expect("\(ControlError.badReply("x"))" == "unreadable reply from the node: x")
}
