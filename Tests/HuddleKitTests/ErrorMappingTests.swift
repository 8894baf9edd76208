import HuddleControl
@testable import HuddleKit
import Testing

@Suite("HuddleKitError mapping")
struct ErrorMappingTests {
    @Test(arguments: [
        (ControlError.Code.tooLarge, HuddleKitError.tooLarge("m")), (.busy, .busy("m")), (.unavailable, .unavailable("m")),
        (.timeout, .timeout("m")), (.notFound, .notFound("m")), (.badRequest, .badRequest("m")), (.ioError, .ioError("m")),
        (.notMember, .notMember("m")), (.internal, .nodeFailed("m")),
    ])
    func everyControlErrorCodeMapsToItsOwnCaseKeepingTheNodesMessage(code: ControlError.Code, expected: HuddleKitError) {
        #expect(HuddleKitError(ControlError(code, "m")) == expected)
        #expect(HuddleKitError.from(ControlError(code, "m")) == expected)
        #expect(expected.description.hasSuffix("m"))
    }

    @Test func everyControlErrorCodeHasACase() {
        let codes = ControlError.Code.wireCodes
        #expect(codes.count == 9)
        let cases = Set(codes.map { "\(HuddleKitError(ControlError($0, "")))" })
        #expect(cases.count == codes.count, "distinct cases: \(cases)")
    }

    @Test func clientErrorsMapToConnectionCases() {
        #expect(HuddleKitError.from(ControlError.noNode(path: "/x.sock")) == .noNode(path: "/x.sock"))
        #expect(HuddleKitError.from(ControlError.closed) == .disconnected)
        #expect(HuddleKitError.from(ControlError.badReply("zz")) == .nodeFailed("unreadable reply: zz"))
        #expect(HuddleKitError.from(ControlError(.untrustedPath, "/p is owned by uid 7")) == .nodeFailed("/p is owned by uid 7"))
        #expect(HuddleKitError.from(HuddleKitError.busy("b")) == .busy("b"))
        struct Other: Error {}
        if case .nodeFailed = HuddleKitError.from(Other()) {} else { Issue.record("an unknown error is nodeFailed") }
    }

    @Test func descriptionsAreOneLine() {
        let all: [HuddleKitError] = [.tooLarge("a"), .busy("a"), .unavailable("a"), .timeout("a"), .notFound("a"), .badRequest("a"),
                                     .ioError("a"), .notMember("a"), .nodeFailed("a"), .noNode(path: "/p"), .disconnected, .nodeRestarted,
                                     .left, .encodingFailed("a"), .decodingFailed("a")]
        for error in all {
            #expect(!error.description.isEmpty && !error.description.contains("\n"), "\(error)")
        }
        #expect(Set(all.map(\.description)).count == all.count)
    }

    @Test func decodingFailuresNameTheField() {
        do {
            _ = try JSONCoding.decode(Ping.self, from: ["n": "seven"])
            Issue.record("decoded a string as Int")
        } catch {
            #expect(error.description.contains("'n'"), "\(error)")
        }
    }

    @Test func onlyWellFormedHuddleKitEnvelopesOfThisVersionOpen() throws {
        let header = try MessageEnvelope.header(kind: .json, tag: "HuddleKitTests.Ping", sender: 0x0102_0304_0506_0708)
        #expect(header.count <= MessageEnvelope.maximumHeader)
        let opened = try #require(MessageEnvelope.open(header + Array(#"{"n":3}"#.utf8)))
        #expect(opened.kind == .json && opened.tag == "HuddleKitTests.Ping" && opened.sender == 0x0102_0304_0506_0708 && opened.recipients.isEmpty)
        // A directed send names its programs; a count past the limit, or recipients cut short, is no envelope.
        let directed = try MessageEnvelope.header(kind: .data, tag: "t", sender: 9, recipients: [1, 0xFFFF_FFFF_FFFF_FFFF])
        let openedDirected = try #require(MessageEnvelope.open(directed + [7]))
        #expect(openedDirected.recipients == [1, 0xFFFF_FFFF_FFFF_FFFF] && openedDirected.payload == [7])
        #expect(MessageEnvelope.open(Array(directed.dropLast(3))) == nil)
        var tooMany = directed; tooMany[15] = UInt8(MessageEnvelope.maximumRecipients + 1)
        #expect(MessageEnvelope.open(tooMany + [UInt8](repeating: 0, count: 200)) == nil)
        #expect(throws: HuddleKitError.self) {
            try MessageEnvelope.header(kind: .data, tag: "t", sender: 9, recipients: Array(0...UInt64(MessageEnvelope.maximumRecipients)))
        }
        #expect(opened.payload == Array(#"{"n":3}"#.utf8))
        var wrongVersion = header; wrongVersion[2] = 1
        var wrongKind = header; wrongKind[3] = 9
        var longLength = header; longLength[12] = 0xFF
        var badUTF8 = header; badUTF8[14] = 0xFF
        for other in [Array("hello".utf8), Array(#"{"huddlekit":1,"type":"Ping","sender":"s","value":1}"#.utf8), [], Array(header.prefix(13)),
                      wrongVersion, wrongKind, longLength, badUTF8] {
            #expect(MessageEnvelope.open(other) == nil, "\(other.prefix(20))")
        }
        #expect(MessageEnvelope.tag(Ping.self) == "HuddleKitTests.Ping", "fully qualified, not the bare name")
        #expect(throws: HuddleKitError.self) { try MessageEnvelope.header(kind: .data, tag: String(repeating: "x", count: 901), sender: 1) }
    }
}
