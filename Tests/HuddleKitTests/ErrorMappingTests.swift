import HuddleControl
@testable import HuddleKit
import Testing

@Suite("HuddleKitError mapping")
struct ErrorMappingTests {
    @Test(arguments: [
        (ControlErrorCode.tooLarge, HuddleKitError.tooLarge("m")), (.busy, .busy("m")), (.unavailable, .unavailable("m")),
        (.timeout, .timeout("m")), (.notFound, .notFound("m")), (.badRequest, .badRequest("m")), (.ioError, .ioError("m")),
        (.notMember, .notMember("m")), (.internal, .nodeFailed("m")),
    ])
    func everyControlErrorCodeMapsToItsOwnCaseKeepingTheNodesMessage(code: ControlErrorCode, expected: HuddleKitError) {
        #expect(HuddleKitError(ControlError(code: code, message: "m")) == expected)
        #expect(HuddleKitError.from(ControlError(code: code, message: "m")) == expected)
        #expect(expected.description.hasSuffix("m"))
    }

    @Test func everyControlErrorCodeHasACase() {
        let codes: [ControlErrorCode] = [.badRequest, .notFound, .tooLarge, .busy, .unavailable, .timeout, .ioError, .notMember, .internal]
        let cases = Set(codes.map { "\(HuddleKitError(ControlError(code: $0, message: "")))" })
        #expect(cases.count == codes.count, "distinct cases: \(cases)")
    }

    @Test func clientErrorsMapToConnectionCases() {
        #expect(HuddleKitError.from(ControlClientError.noNode(path: "/x.sock")) == .noNode(path: "/x.sock"))
        #expect(HuddleKitError.from(ControlClientError.closed) == .disconnected)
        #expect(HuddleKitError.from(ControlClientError.badReply("zz")) == .nodeFailed("unreadable reply: zz"))
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

    @Test func onlyHuddleKitEnvelopesOfThisVersionOpen() {
        let text = MessageEnvelope.text(tag: "Ping", sender: "s1", value: ["n": 3])
        let opened = MessageEnvelope.open(text)
        #expect(opened?.tag == "Ping" && opened?.sender == "s1" && opened?.value == ["n": 3])
        for other in ["hello", "{}", #"{"huddlekit":2,"type":"Ping","sender":"s","value":1}"#, #"{"huddlekit":1,"type":"Ping"}"#, "[1]"] {
            #expect(MessageEnvelope.open(other) == nil, "\(other)")
        }
        #expect(MessageEnvelope.tag(Ping.self) == "Ping")
    }
}
