import HuddleControl
import HuddleTestSupport
import Testing

/// Issue 33, item 6: the control protocol's parser (`JSON.parse`, then `ControlRequest.parse`)
/// against any line a local program can send: JSON made by a grammar (nesting past the limit,
/// numbers past every range, escapes and lone surrogates, invalid UTF-8), requests of every op
/// with fields of every type, and both damaged. A trap ends the process, so passing means no line
/// trapped; the counts show that undamaged requests of every op still parse (a parser that refused
/// everything would pass "no trap" and fail here). `make test` runs 20,000 lines; `make fuzz` 1,000,000.
@Suite struct ControlInputFuzzTests {
    static let ops = ["status", "members", "stats", "attach.list", "activity.get", "join", "send", "subscribe", "activity.set",
                      "attach.add", "attach.get", "attach.remove", "leave", "rekey", "remove", "invite", "admins", "nonsense", ""]
    /// A valid line of every op (then damaged, or extended with fields drawn from the grammar).
    static let valid = [
        #"{"op":"status"}"#, #"{"op":"send","text":"hi","to":["0123456789abcdef"],"reliable":false}"#,
        #"{"op":"send","data":"AAEC"}"#, #"{"op":"subscribe","topics":["messages","members"],"since":12}"#,
        #"{"op":"join","addr":"127.0.0.1:7000"}"#, #"{"op":"activity.set","value":{"a":[1,2,{"b":null}]}}"#,
        #"{"op":"attach.add","path":"/tmp/x"}"#, #"{"op":"attach.get","id":"00ff","path":"/tmp/y"}"#,
        #"{"op":"attach.remove","id":"00ff"}"#, #"{"op":"remove","member":"0123456789abcdef"}"#,
        #"{"op":"invite","ttl_ms":60000,"uses":3}"#, #"{"op":"leave","timeout_ms":5000}"#, #"{"id":7,"op":"rekey"}"#,
        #"{"op":"subscribe","topics":["messages"],"encoding":"binary"}"#, #"{"op":"admins"}"#,
        #"{"op":"admins","add":["00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"],"remove":[]}"#,
    ]
    static let fields = ["id", "op", "body", "body_b64", "to", "reliable", "since", "topics", "value", "path", "out", "attachment",
                         "timeout_ms", "member", "addr", "ttl_ms", "uses", "encoding", "name", "text", "data", "add", "remove"]
    static let numbers = ["0", "-0", "1", "-1", "9007199254740991", "9007199254740992", "-9007199254740993", "18446744073709551616",
                          "1e308", "1e309", "-1e-400", "0.5", "1E+2", "123456789012345678901234567890", "01", "1.", ".5", "--1", "1e"]
    static let strings = ["\"\"", "\"a\"", "\"\\u0000\"", "\"\\ud800\"", "\"\\udc00\\ud800\"", "\"\\ud83d\\ude00\"", "\"\\x\"", "\"\\u12\"",
                          "\"/abs/path\"", "\"rel\"", "\"0123456789abcdef\"", "\"messages\"", "\"\u{0}\"", "\"é\"", "\"\u{1F600}\""]

    /// A JSON-ish text: values from the grammar above, nested up to `depth`, sometimes broken.
    static func value(_ rng: inout FuzzRandom, depth: Int) -> String {
        let pick = Int.random(in: 0..<(depth > 0 ? 9 : 6), using: &rng)
        switch pick {
        case 0: return numbers.randomElement(using: &rng) ?? "0"
        case 1: return strings.randomElement(using: &rng) ?? "\"\""
        case 2: return ["true", "false", "null", "nul", "tru"].randomElement(using: &rng) ?? "null"
        case 3: return "\"" + String(repeating: "x", count: Int.random(in: 0...300, using: &rng)) + "\""
        case 4: return String(UInt64.random(in: 0 ... .max, using: &rng))
        case 5: return "\"" + String(decoding: rng.bytes(Int.random(in: 0...12, using: &rng)).filter { $0 != 0x22 && $0 != 0x5C }, as: UTF8.self) + "\""
        case 6: return "[" + (0..<Int.random(in: 0...4, using: &rng)).map { _ in value(&rng, depth: depth - 1) }.joined(separator: ",") + "]"
        case 7:
            // Nesting at and past the parser's limit (64).
            let n = Int.random(in: 60...70, using: &rng)
            return String(repeating: "[", count: n) + String(repeating: "]", count: n - Int.random(in: 0...1, using: &rng))
        default: return object(&rng, depth: depth - 1, op: nil)
        }
    }

    static func object(_ rng: inout FuzzRandom, depth: Int, op: String?) -> String {
        var members: [String] = []
        if let op { members.append("\"op\":\"\(op)\"") }
        for _ in 0..<Int.random(in: 0...5, using: &rng) {
            members.append("\"\(fields.randomElement(using: &rng) ?? "id")\":\(value(&rng, depth: depth))")
        }
        members.shuffle(using: &rng)
        return "{" + members.joined(separator: ",") + "}"
    }

    @Test func noLineAProgramCanSendTrapsTheControlParser() {
        let run = FuzzRun("control-json")
        var parsedJSON = 0, requests = [String: Int]()
        for index in 0..<run.count {
            var rng = run.random(index)
            let text: String
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: text = Self.value(&rng, depth: 4)
            case 1: text = Self.valid.randomElement(using: &rng) ?? "{}"
            default: text = Self.object(&rng, depth: 3, op: Self.ops.randomElement(using: &rng))
            }
            let undamaged = Array(text.utf8)
            let bytes = Bool.random(using: &rng) ? undamaged : rng.damage(undamaged)
            run.record(index, bytes)
            if (try? JSON.parse(bytes)) != nil { parsedJSON += 1 }
            if case let .success(request) = ControlRequest.parse(bytes).request { requests[Self.op(of: request), default: 0] += 1 }
        }
        print("fuzz control-json: \(parsedJSON) lines parsed as JSON; requests taken per op: \(requests.sorted { $0.key < $1.key })")
        #expect(parsedJSON >= run.count / 10, "only \(parsedJSON) lines parsed")
        // Every op parses: the valid lines of each (undamaged half the time), and the ops without
        // required fields whenever the fields drawn happen to be acceptable.
        for op in ["status", "members", "stats", "attach.list", "activity.get", "join", "send", "subscribe", "activity.set",
                   "attach.add", "attach.get", "attach.remove", "leave", "rekey", "remove", "invite", "admins"] {
            #expect(requests[op, default: 0] >= run.count / 2000, "op \(op) parsed only \(requests[op, default: 0]) times")
        }
    }

    /// The op a request is (the protocol's name).
    static func op(of request: ControlRequest) -> String {
        let label = String(describing: request).prefix { $0 != "(" }
        let names = ["attachList": "attach.list", "activityGet": "activity.get", "activitySet": "activity.set", "attachAdd": "attach.add",
                     "attachGet": "attach.get", "attachRemove": "attach.remove"]
        return names[String(label)] ?? String(label)
    }
}
