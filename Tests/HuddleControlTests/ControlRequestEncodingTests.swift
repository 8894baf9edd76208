import Foundation
import HuddleControl
import HuddleTestSupport
import Testing

/// The client side of the control protocol: `ControlRequest.encoded(id:)` is the inverse of
/// `decode` for requests of every op (a generated property test), its lines are the ones
/// CONTROL.md shows, and replies decode to their typed results or are refused naming the field.
@Suite struct ControlRequestEncodingTests {
    /// Every case of `ControlRequest`, by op: a generated request of each must be drawn.
    static let ops = ["status", "members", "join", "send", "subscribe", "stats", "activity.get", "activity.set", "attach.add", "attach.list",
                      "attach.get", "attach.remove", "leave", "invite", "remove", "rekey", "admins", "diagnose", "participant.join",
                      "participant.leave", "participants"]

    static func hex(_ rng: inout FuzzRandom, _ digits: Int, upper: Bool = false) -> String {
        let alphabet = Array(upper ? "0123456789abcdefABCDEF" : "0123456789abcdef")
        return String((0..<digits).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] })
    }

    /// A string with what a JSON writer must escape: quotes, backslashes, control characters, non-ASCII.
    static func text(_ rng: inout FuzzRandom) -> String {
        let pieces = ["a", "Z", " ", "\"", "\\", "\n", "\t", "\u{0}", "\u{1F}", "é", "\u{1F600}", "/", "{", "}", ":", ",", "\u{FEFF}", "\u{7F}"]
        return (0..<Int.random(in: 0...12, using: &rng)).map { _ in pieces.randomElement(using: &rng) ?? "" }.joined()
    }

    static func json(_ rng: inout FuzzRandom, depth: Int) -> JSON {
        switch Int.random(in: 0..<(depth > 0 ? 8 : 6), using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(Int64.random(in: Int64.min ... Int64.max, using: &rng))
        case 3: return .double(Double(Int32.random(in: .min ... .max, using: &rng)) / 64)
        case 4, 5: return .string(text(&rng))
        case 6: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in json(&rng, depth: depth - 1) })
        default:
            var o = JSONObject()
            for _ in 0..<Int.random(in: 0...3, using: &rng) { o[text(&rng)] = json(&rng, depth: depth - 1) }
            return .object(o)
        }
    }

    static func optional<T>(_ rng: inout FuzzRandom, _ make: (inout FuzzRandom) -> T) -> T? {
        Bool.random(using: &rng) ? make(&rng) : nil
    }

    /// A request of `op` that `decode` could return: fields of their types, within their limits.
    static func request(_ op: String, _ rng: inout FuzzRandom) -> ControlRequest {
        let member = { (rng: inout FuzzRandom) in hex(&rng, 16, upper: true) }
        let millis = { (rng: inout FuzzRandom) in Int64.random(in: 0...Int64.max, using: &rng) }
        switch op {
        case "status": return .status
        case "members": return .members
        case "stats": return .stats
        case "activity.get": return .activityGet
        case "attach.list": return .attachList
        case "rekey": return .rekey
        case "diagnose": return .diagnose
        case "join": return .join(addr: text(&rng))
        case "send":
            // A body of text, of bytes that are not UTF-8, or of nothing; an envelope in front of it or not.
            var body: [UInt8]
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: body = Array(text(&rng).utf8)
            case 1: body = rng.bytes(Int.random(in: 0...40, using: &rng)) + [0xC3]
            default: body = []
            }
            let envelope = Bool.random(using: &rng) ? rng.bytes(Int.random(in: 1...64, using: &rng)) : []
            body = envelope + body
            let to = optional(&rng) { rng in (0..<Int.random(in: 0...3, using: &rng)).map { _ in member(&rng) } }
            return .send(.init(body: body, to: to, reliable: Bool.random(using: &rng), envelope: envelope.count))
        case "subscribe":
            let topics = Set(ControlTopic.allCases.filter { _ in Bool.random(using: &rng) })
            return .subscribe(topics: Bool.random(using: &rng) ? ControlTopic.defaults : topics, since: optional(&rng, millis),
                              encoding: Bool.random(using: &rng) ? .lines : .binary)
        case "activity.set": return .activitySet(value: json(&rng, depth: 3))
        case "attach.add": return .attachAdd(path: text(&rng), name: optional(&rng, text), meta: json(&rng, depth: 2))
        case "attach.get":
            return .attachGet(id: text(&rng), path: text(&rng), wait: Bool.random(using: &rng), timeoutMs: optional(&rng, millis),
                              mode: optional(&rng) { rng in Int.random(in: 0...0o777, using: &rng) })
        case "attach.remove": return .attachRemove(id: text(&rng))
        case "leave": return .leave(timeoutMs: optional(&rng, millis))
        case "invite":
            return .invite(ttlMs: optional(&rng) { rng in Int64.random(in: 1_000...ControlRequest.maximumInviteTTLMs, using: &rng) },
                           uses: optional(&rng) { rng in Int.random(in: 1...ControlRequest.maximumInviteUses, using: &rng) })
        case "remove": return .remove(member: Bool.random(using: &rng) ? member(&rng) : hex(&rng, 64, upper: true))
        case "admins":
            let keys = { (rng: inout FuzzRandom) in (0..<Int.random(in: 0...3, using: &rng)).map { _ in hex(&rng, 64) } }
            return .admins(add: keys(&rng), remove: keys(&rng))
        case "participant.join": return .participantJoin(activity: text(&rng), program: optional(&rng, member))
        case "participant.leave": return .participantLeave(program: member(&rng))
        case "participants": return .participants(activity: optional(&rng, text))
        default: preconditionFailure("no generator for \(op)")
        }
    }

    /// The property: a generated request of every op, encoded and parsed as a node parses a line,
    /// is the same request, and the line carries the id it was given (or the attachment's).
    @Test func everyRequestDecodesToItselfOnceEncoded() {
        let run = FuzzRun("control-request-encoding", defaultCount: 4_200)
        var drawn: [String: Int] = [:]
        for index in 0..<run.count {
            var rng = run.random(index)
            let op = Self.ops[index % Self.ops.count]
            let request = Self.request(op, &rng)
            let id = JSON.int(Int64(index))
            let line = request.line(id: id)
            run.record(index, line)
            #expect(request.op == op)
            #expect(line.last == 0x0A && !line.dropLast().contains(0x0A), "one line: \(String(decoding: line, as: UTF8.self))")
            let (echoed, parsed) = ControlRequest.parse(Array(line.dropLast()))
            switch parsed {
            case let .success(back):
                #expect(back == request, "input \(index): \(String(decoding: line, as: UTF8.self))")
            case let .failure(error):
                Issue.record("input \(index) was refused (\(error)): \(String(decoding: line, as: UTF8.self))")
            }
            switch request {
            case let .attachGet(attachment, _, _, _, _), let .attachRemove(attachment): #expect(echoed == .string(attachment))
            default: #expect(echoed == id)
            }
            drawn[op, default: 0] += 1
        }
        #expect(Set(drawn.keys) == Set(Self.ops), "a request of every op was drawn")
    }

    /// The lines CONTROL.md shows (`subscribe {"since": C}`), with fields in its table's order and
    /// optional ones only when set; the same lines as the Python client's tests.
    @Test func encodedLinesAreCONTROLmdsLines() {
        func line(_ r: ControlRequest, id: JSON? = nil) -> String { String(decoding: r.line(id: id).dropLast(), as: UTF8.self) }
        let member = "00000000000000ab", key = String(repeating: "0f", count: 32)
        #expect(line(.status, id: 7) == #"{"op":"status","id":7}"#)
        #expect(line(.members) == #"{"op":"members"}"#)
        #expect(line(.subscribe(topics: ControlTopic.defaults, since: 42)) == #"{"op":"subscribe","since":42}"#)
        #expect(line(.subscribe(topics: [.messages], since: 13), id: 1) == #"{"op":"subscribe","id":1,"topics":["messages"],"since":13}"#)
        #expect(line(.subscribe(topics: [.participants, .members], since: nil, encoding: .binary), id: 2)
            == #"{"op":"subscribe","id":2,"topics":["members","participants"],"encoding":"binary"}"#)
        #expect(line(.attachGet(id: "17de4d4005d651d47abe23c1964966c7", path: "/tmp/out", wait: true, timeoutMs: 5, mode: nil), id: 9)
            == #"{"op":"attach.get","id":"17de4d4005d651d47abe23c1964966c7","path":"/tmp/out","timeout_ms":5}"#)
        #expect(line(.attachGet(id: "x", path: "/o", wait: false, timeoutMs: nil, mode: 0o644)) == #"{"op":"attach.get","id":"x","path":"/o","wait":false,"mode":"644"}"#)
        #expect(line(.attachRemove(id: "x"), id: 3) == #"{"op":"attach.remove","id":"x"}"#)
        #expect(line(.join(addr: "127.0.0.1:7400"), id: 1) == #"{"op":"join","id":1,"addr":"127.0.0.1:7400"}"#)
        #expect(line(.send(.init(body: Array("hi \"there\"".utf8), to: [member], reliable: false)), id: 2)
            == #"{"op":"send","id":2,"text":"hi \"there\"","to":["00000000000000ab"],"reliable":false}"#)
        #expect(line(.send(.init(body: [0, 1, 0xFF], to: nil, reliable: true))) == #"{"op":"send","data":"AAH/"}"#)
        #expect(line(.send(.init(body: [1, 2] + Array("x".utf8), to: nil, reliable: true, envelope: 2))) == #"{"op":"send","text":"x","envelope":"AQI="}"#)
        #expect(line(.activitySet(value: ["canvas": 2])) == #"{"op":"activity.set","value":{"canvas":2}}"#)
        #expect(line(.attachAdd(path: "/f", name: nil, meta: .null)) == #"{"op":"attach.add","path":"/f"}"#)
        #expect(line(.attachAdd(path: "/f", name: "n", meta: ["location": [10, 20]])) == #"{"op":"attach.add","path":"/f","name":"n","meta":{"location":[10,20]}}"#)
        #expect(line(.leave(timeoutMs: nil)) == #"{"op":"leave"}"#)
        #expect(line(.leave(timeoutMs: 30_000)) == #"{"op":"leave","timeout_ms":30000}"#)
        #expect(line(.invite(ttlMs: 600_000, uses: 1)) == #"{"op":"invite","ttl_ms":600000,"uses":1}"#)
        #expect(line(.remove(member: member)) == #"{"op":"remove","member":"00000000000000ab"}"#)
        #expect(line(.rekey) == #"{"op":"rekey"}"#)
        #expect(line(.admins(add: [key], remove: [])) == #"{"op":"admins","add":["\#(key)"]}"#)
        #expect(line(.participantJoin(activity: "draw", program: nil)) == #"{"op":"participant.join","activity":"draw"}"#)
        #expect(line(.participants(activity: nil)) == #"{"op":"participants"}"#)
    }

    /// A value `decode` would refuse is written as it is, for the node to refuse (no trap here).
    @Test func valuesOutOfRangeAreWrittenForTheNodeToRefuse() {
        func refusal(_ r: ControlRequest) -> ControlError.Code? {
            if case let .failure(e) = ControlRequest.parse(Array(r.line().dropLast())).request { e.code } else { nil }
        }
        #expect(refusal(.attachGet(id: "x", path: "/o", wait: true, timeoutMs: -1, mode: nil)) == .badRequest)
        #expect(refusal(.attachGet(id: "x", path: "/o", wait: true, timeoutMs: nil, mode: 0o1000)) == .badRequest)
        #expect(refusal(.attachGet(id: "x", path: "/o", wait: true, timeoutMs: nil, mode: -1)) == .badRequest)
        #expect(refusal(.send(.init(body: [], to: ["nope"], reliable: true))) == .badRequest)
        #expect(refusal(.invite(ttlMs: 1, uses: 0)) == .badRequest)
        #expect(refusal(.activitySet(value: .string(String(repeating: "a", count: ControlRequest.maximumActivityBytes)))) == .tooLarge)
        // An envelope longer than the body: all of it the envelope, nothing lost, no trap.
        let odd = ControlRequest.send(.init(body: [1, 2], to: nil, reliable: true, envelope: 5))
        #expect(String(decoding: odd.line().dropLast(), as: UTF8.self) == #"{"op":"send","text":"","envelope":"AQI="}"#)
        #expect(refusal(.subscribe(topics: [], since: -3)) == .badRequest)
    }

    /// The checks the CLI makes before it asks (octal modes, topic names) refuse as the node does.
    @Test func theSharedChecksRefuseAsTheNodeDoes() throws {
        #expect(try ControlRequest.permissionBits("0644") == 0o644)
        #expect(throws: ControlError.self) { try ControlRequest.permissionBits("999") }
        #expect(try ControlRequest.topic("members") == .members)
        let unknown = #"{"op":"subscribe","topics":["nonsense"]}"#
        guard case let .failure(nodeSays) = ControlRequest.parse(Array(unknown.utf8)).request else { Issue.record("refused"); return }
        #expect(throws: nodeSays) { try ControlRequest.topic("nonsense") }
    }

    /// Replies shaped as a node writes them decode to their typed results; a reply missing a field
    /// CONTROL.md names, or holding it with another type, is refused naming the op and the field.
    @Test func repliesDecodeToTheirResultsOrAreRefusedNamingTheField() throws {
        let member = "00000000000000ab"
        let attachment: JSON = ["id": "ff", "name": "n", "size": 10, "meta": ["k": 1], "from": .string(member), "chunk_size": 4, "chunks": 3,
                                "have": 3, "complete": true, "holders": [.string(member)], "state": "announced"]
        let status: JSONObject = ["id": 1, "ok": true, "member": .string(member), "node": "0f", "name": "a", "addr": "127.0.0.1:1", "session": "s",
                                  "members": 2, "clock": [member: 4, "00000000000000aa": 1], "baseline": [:], "uptime_ms": 5, "epoch": 0,
                                  "resumed": false, "reflexive": ["1.2.3.4:5"], "nat": "none"]
        let decoded = try ControlResponse(status, for: .status)
        #expect(decoded.fields == status, "the reply as the node wrote it")
        let s = try decoded.status
        #expect(s.member == member && s.members == 2 && s.admins == [] && s.reflexive == ["1.2.3.4:5"])
        #expect(s.clock == [.init(member: member, seq: 4), .init(member: "00000000000000aa", seq: 1)], "in the node's order")
        let row: JSON = ["member": .string(member), "node": "0f", "name": "a", "addr": "h:1", "state": "alive", "incarnation": 3, "self": true,
                         "rtt_ms": 0.25, "path": "self", "via": nil]
        let members = try ControlResponse(["ok": true, "members": [row]], for: .members).members
        #expect(members.count == 1 && members[0].isSelf && members[0].rttMs == 0.25 && members[0].via == nil)
        #expect(try ControlResponse(["ok": true, "msg": "m", "seq": nil], for: .send(.init(body: [], to: nil, reliable: false))).sent
            == ControlSendReceipt(msg: "m", seq: nil))
        #expect(try ControlResponse(["ok": true, "attachment": attachment], for: .attachAdd(path: "/f", name: nil, meta: .null)).attachment.holders == [member])
        let written = try ControlResponse(["ok": true, "attachment": attachment, "path": "/o"], for: .attachGet(id: "ff", path: "/o", wait: true, timeoutMs: nil, mode: nil))
        #expect(try written.attachment.id == "ff")
        #expect(try ControlResponse(["ok": true, "activity": nil, "set_by": nil], for: .activityGet).activity.setBy == nil)
        #expect(try ControlResponse(["ok": true, "epoch": 3, "admins": ["0f"]], for: .admins(add: [], remove: [])).epoch == 3)
        let stats = try ControlResponse(["id": 4, "ok": true, "links": 2], for: .stats)
        #expect(try stats.report == ["links": 2], "a report without the reply's id and ok")

        func refusal(_ reply: JSONObject, _ request: ControlRequest) -> String? {
            do {
                _ = try ControlResponse(reply, for: request)
                return nil
            } catch {
                if case let .badReply(why) = error.code { return why }
                return "\(error)"
            }
        }
        var partial = status
        partial["members"] = "two"
        #expect(refusal(partial, .status) == #"the status reply has no "members" integer"#)
        #expect(refusal(["ok": true, "members": [["member": .string(member)]]], .members) == #"a member has no "node" string"#)
        #expect(refusal(["ok": true], .subscribe(topics: [.members], since: nil)) == #"the subscribe reply has no "cursor" integer"#)
        #expect(refusal(["ok": true, "attachments": [1]], .attachList) == #"the attach.list reply has no "attachments" list of objects"#)
        #expect(throws: ControlError.self, "the result of another op") { _ = try stats.status }
    }
}
