import Foundation
import HuddleControl
import Testing

/// Pure tests of request decoding: every op from a representative line, and each missing or
/// ill-typed field refused with `bad_request` naming it (CONTROL.md).
private func parse(_ line: String) -> (id: JSON, request: Result<ControlRequest, ControlError>) {
    ControlRequest.parse(Array(line.utf8))
}

private func request(_ line: String) -> ControlRequest? {
    if case let .success(r) = parse(line).request { r } else { nil }
}

private func refusal(_ line: String) -> ControlError? {
    if case let .failure(e) = parse(line).request { e } else { nil }
}

private let member = "00000000000000ab"

@Test func everyOpDecodesFromARepresentativeLine() {
    #expect(request(#"{"op":"status"}"#) == .status)
    #expect(request(#"{"op":"members"}"#) == .members)
    #expect(request(#"{"op":"stats"}"#) == .stats)
    #expect(request(#"{"op":"attach.list"}"#) == .attachList)
    #expect(request(#"{"op":"activity.get"}"#) == .activityGet)
    #expect(request(#"{"op":"join","addr":"h:1"}"#) == .join(addr: "h:1"))
    #expect(request(#"{"op":"send","text":"hi"}"#) == .send(.init(body: Array("hi".utf8), to: nil, reliable: true)))
    #expect(request(#"{"op":"send","data":"AAE=","to":["\#(member)"],"reliable":false}"#) == .send(.init(body: [0, 1], to: [member], reliable: false)))
    #expect(request(#"{"op":"subscribe"}"#) == .subscribe(topics: ControlTopic.defaults, since: nil), "invite events only when asked for")
    #expect(request(#"{"op":"subscribe","topics":["messages"],"since":7}"#) == .subscribe(topics: [.messages], since: 7))
    #expect(request(#"{"op":"activity.set","value":{"a":[1]}}"#) == .activitySet(value: ["a": [1]]))
    #expect(request(#"{"op":"attach.add","path":"/f","name":"n","meta":{"k":1}}"#) == .attachAdd(path: "/f", name: "n", meta: ["k": 1]))
    #expect(request(#"{"op":"attach.add","path":"/f"}"#) == .attachAdd(path: "/f", name: nil, meta: .null))
    #expect(request(#"{"op":"attach.get","id":"x","path":"/o"}"#) == .attachGet(id: "x", path: "/o", wait: true, timeoutMs: nil, mode: nil))
    #expect(request(#"{"op":"attach.get","id":"x","path":"/o","wait":false,"timeout_ms":250}"#) == .attachGet(id: "x", path: "/o", wait: false, timeoutMs: 250, mode: nil))
    #expect(request(#"{"op":"attach.get","id":"x","path":"/o","mode":"644"}"#) == .attachGet(id: "x", path: "/o", wait: true, timeoutMs: nil, mode: 0o644))
    #expect(request(#"{"op":"attach.get","id":"x","path":"/o","mode":"0600"}"#) == .attachGet(id: "x", path: "/o", wait: true, timeoutMs: nil, mode: 0o600))
    #expect(request(#"{"op":"attach.remove","id":"x"}"#) == .attachRemove(id: "x"))
    #expect(request(#"{"op":"leave"}"#) == .leave(timeoutMs: nil))
    #expect(request(#"{"op":"leave","timeout_ms":0}"#) == .leave(timeoutMs: 0))
    #expect(request(#"{"op":"invite"}"#) == .invite(ttlMs: nil, uses: nil))
    #expect(request(#"{"op":"invite","ttl_ms":60000,"uses":2}"#) == .invite(ttlMs: 60000, uses: 2))
    #expect(request(#"{"op":"subscribe","topics":["invite"]}"#) == .subscribe(topics: [.invite], since: nil))
}

@Test func theIdComesBackAndAnUnusableOneIsNull() {
    #expect(parse(#"{"op":"status","id":42}"#).id == 42)
    #expect(parse(#"{"op":"nope","id":"a"}"#).id == "a", "an error keeps the request's id")
    #expect(parse(#"{"op":"status","id":[1]}"#).id == .null)
    #expect(refusal(#"{"op":"status","id":{"x":1}}"#)?.message == "\"id\" must be a JSON scalar")
    #expect(parse("not json").id == .null)
}

@Test func eachMissingOrIllTypedFieldIsABadRequestNamingIt() {
    let cases: [(String, String)] = [
        ("not json", "request is not valid JSON"),
        ("[1]", "a request must be a JSON object"),
        (#"{"id":1}"#, "\"op\""),
        (#"{"op":"fly"}"#, "unknown op \"fly\""),
        (#"{"op":"join"}"#, "\"addr\""),
        (#"{"op":"invite","ttl_ms":5}"#, "\"ttl_ms\" must be between"),
        (#"{"op":"invite","uses":0}"#, "\"uses\" must be between"),
        (#"{"op":"invite","uses":"x"}"#, "\"uses\" must be between"),
        (#"{"op":"send"}"#, "\"text\""),
        (#"{"op":"send","text":"a","data":"AA=="}"#, "exactly one of"),
        (#"{"op":"send","data":"%%%"}"#, "\"data\" is not valid base64"),
        (#"{"op":"send","text":"a","to":"x"}"#, "\"to\" must be a list"),
        (#"{"op":"send","text":"a","to":["zz"]}"#, "not a member id"),
        (#"{"op":"send","text":"a","reliable":"no"}"#, "\"reliable\""),
        (#"{"op":"subscribe","topics":"all"}"#, "\"topics\" must be a list"),
        (#"{"op":"subscribe","topics":["weather"]}"#, "unknown topic"),
        (#"{"op":"subscribe","since":-1}"#, "\"since\""),
        (#"{"op":"activity.set"}"#, "\"value\""),
        (#"{"op":"attach.add"}"#, "\"path\""),
        (#"{"op":"attach.add","path":"/f","name":3}"#, "\"name\" must be a string"),
        (#"{"op":"attach.get","id":"x"}"#, "\"path\""),
        (#"{"op":"attach.get","id":"x","path":"/o","wait":"yes"}"#, "\"wait\""),
        (#"{"op":"attach.get","id":"x","path":"/o","timeout_ms":-5}"#, "\"timeout_ms\""),
        (#"{"op":"attach.get","id":"x","path":"/o","mode":644}"#, "\"mode\" must be permission bits in octal"),
        (#"{"op":"attach.get","id":"x","path":"/o","mode":"4755"}"#, "\"mode\""),
        (#"{"op":"attach.get","id":"x","path":"/o","mode":"68"}"#, "\"mode\""),
        (#"{"op":"attach.get","id":"x","path":"/o","mode":""}"#, "\"mode\""),
        (#"{"op":"attach.remove"}"#, "\"id\""),
        (#"{"op":"leave","timeout_ms":"soon"}"#, "\"timeout_ms\""),
    ]
    for (line, names) in cases {
        let error = refusal(line)
        #expect(error?.code == .badRequest, "\(line) → \(String(describing: error))")
        #expect(error?.message.contains(names) == true, "\(line) → \(String(describing: error?.message)), expected it to name \(names)")
    }
}

@Test func anActivityValueOverSixteenKiBIsTooLarge() {
    let fits = String(repeating: "a", count: ControlRequest.maximumActivityBytes - 2)
    #expect(request(#"{"op":"activity.set","value":"\#(fits)"}"#) != nil)
    let error = refusal(#"{"op":"activity.set","value":"\#(fits)a"}"#)
    #expect(error?.code == .tooLarge)
}

@Test func aSendsEnvelopeGoesInFrontOfTheBodyAndIsBounded() {
    // {"envelope": base64 of [1, 2], "data": base64 of [3]}: the body is [1, 2, 3], 2 bytes of it envelope.
    #expect(request(#"{"op":"send","envelope":"AQI=","data":"Aw=="}"#) == .send(.init(body: [1, 2, 3], to: nil, reliable: true, envelope: 2)))
    #expect(request(#"{"op":"send","text":"hi"}"#) == .send(.init(body: Array("hi".utf8), to: nil, reliable: true, envelope: 0)))
    let big = Data(repeating: 0, count: ControlRequest.maximumEnvelopeBytes + 1).base64EncodedString()
    #expect(refusal(#"{"op":"send","text":"x","envelope":"\#(big)"}"#)?.code == .tooLarge)
    #expect(refusal(#"{"op":"send","text":"x","envelope":"%%"}"#)?.code == .badRequest)
    #expect(refusal(#"{"op":"send","text":"x","envelope":7}"#)?.code == .badRequest)
}

/// Issue 33: `admins` reads the admin set, or with `add`/`remove` (node keys) changes it.
@Test func theAdminsOpTakesListsOfNodeKeysOnly() {
    let key = String(repeating: "AB", count: 32)
    #expect(request(#"{"op":"admins"}"#) == .admins(add: [], remove: []))
    #expect(request(#"{"op":"admins","add":["\#(key)"],"remove":null}"#) == .admins(add: [key.lowercased()], remove: []))
    #expect(request(#"{"op":"admins","remove":["\#(key)"]}"#) == .admins(add: [], remove: [key.lowercased()]))
    for bad in [#"{"op":"admins","add":"\#(key)"}"#, #"{"op":"admins","add":["\#(member)"]}"#, #"{"op":"admins","remove":[1]}"#] {
        #expect(refusal(bad)?.code == .badRequest, "\(bad)")
    }
}
