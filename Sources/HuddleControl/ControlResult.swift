/// A node's `ok` reply to one request: the object as the node wrote it, and its result decoded
/// for the request's op. The one place a client reads a reply's fields.
///
/// Guarantees: `result` is the case of the request's op (`ControlResult.decode`), with every field
/// CONTROL.md names for it present and of its type; a reply that is not was refused with
/// `ControlError.badReply` naming the op and the field. `fields` is the reply unchanged
/// (`id`, `ok` and the result fields in the node's order): what `huddle --json` prints.
public struct ControlResponse: Sendable, Equatable {
    public let fields: JSONObject
    public let result: ControlResult

    public init(fields: JSONObject, result: ControlResult) {
        self.fields = fields
        self.result = result
    }

    /// The reply `fields` to `request`, decoded.
    public init(_ fields: JSONObject, for request: ControlRequest) throws(ControlError) {
        self.init(fields: fields, result: try ControlResult.decode(fields, for: request))
    }
}

/// What a request's `ok` reply says, one case per kind of reply (CONTROL.md's result fields).
public enum ControlResult: Sendable, Equatable {
    /// `status`.
    case status(ControlStatus)
    /// `members`: the members as this node sees them, in its order.
    case members([ControlMember])
    /// `join`: how many members are alive once joined.
    case joined(members: Int64)
    /// `send`.
    case sent(ControlSendReceipt)
    /// `subscribe`: the latest cursor when subscribed; events follow on the connection.
    case subscribed(cursor: Int64)
    /// `stats` and `diagnose`: open-ended reports, the result fields as they are.
    case report(JSONObject)
    /// `activity.get`: the value (any JSON, null when none) and who set it.
    case activity(value: JSON, setBy: String?)
    /// Ops whose reply carries no result: `activity.set`, `attach.remove`, `participant.leave`.
    case done
    /// `attach.add`.
    case attachment(ControlAttachment)
    /// `attach.list`.
    case attachments([ControlAttachment])
    /// `attach.get`: the attachment (nil when the node no longer knows it) and the path written.
    case written(attachment: ControlAttachment?, path: String)
    /// `leave`: how many chunks were pushed to others before the node left.
    case left(handedOff: Int64)
    /// `invite`.
    case invitation(ControlInvitation)
    /// `remove` and `rekey`: the epoch the session is on now.
    case epoch(Int64)
    /// `admins`: the session's admin set (node keys) and its epoch.
    case admins([String], epoch: Int64)
    /// `participant.join`: the participant this connection's program now is.
    case participant(ControlParticipant)
    /// `participants`.
    case participants([ControlParticipant])

    /// The result of `request` in its `ok` reply `object`.
    public static func decode(_ object: JSONObject, for request: ControlRequest) throws(ControlError) -> ControlResult {
        let r = ReplyFields(object, what: "the \(request.op) reply")
        switch request {
        case .status: return .status(try ControlStatus(r))
        case .members: return .members(try r.objects("members").map { (o: JSONObject) throws(ControlError) -> ControlMember in try ControlMember(o) })
        case .join: return .joined(members: try r.int("members"))
        case .send: return .sent(ControlSendReceipt(msg: try r.string("msg"), seq: try r.optionalInt("seq")))
        case .subscribe: return .subscribed(cursor: try r.int("cursor"))
        case .stats, .diagnose:
            var report = object
            report["id"] = nil
            report["ok"] = nil
            return .report(report)
        case .activityGet: return .activity(value: r.value("activity"), setBy: try r.optionalString("set_by"))
        case .activitySet, .attachRemove, .participantLeave: return .done
        case .attachAdd: return .attachment(try ControlAttachment(try r.object("attachment")))
        case .attachList:
            return .attachments(try r.objects("attachments").map { (o: JSONObject) throws(ControlError) -> ControlAttachment in try ControlAttachment(o) })
        case .attachGet:
            let attachment = try r.value("attachment").isNull ? nil : ControlAttachment(r.object("attachment"))
            return .written(attachment: attachment, path: try r.string("path"))
        case .leave: return .left(handedOff: try r.int("handed_off"))
        case .invite:
            return .invitation(ControlInvitation(code: try r.string("code"), addr: try r.string("addr"), expiresMs: try r.int("expires_ms")))
        case .remove, .rekey: return .epoch(try r.int("epoch"))
        case .admins: return .admins(try r.strings("admins"), epoch: try r.int("epoch"))
        case .participantJoin: return .participant(try ControlParticipant(try r.object("participant")))
        case .participants:
            return .participants(try r.objects("participants").map { (o: JSONObject) throws(ControlError) -> ControlParticipant in try ControlParticipant(o) })
        }
    }
}

/// A node's `status` (CONTROL.md).
public struct ControlStatus: Sendable, Equatable {
    public var member: String
    /// The node key, hex.
    public var node: String
    public var name: String
    /// The advertised `host:port`.
    public var addr: String
    /// The session key's fingerprint.
    public var session: String
    /// Members alive, this one included.
    public var members: Int64
    /// Member → highest broadcast seq delivered here, in the node's order.
    public var clock: [ControlClockEntry]
    /// The clock this member took from its sponsor when it joined.
    public var baseline: [ControlClockEntry]
    public var uptimeMs: Int64
    public var epoch: Int64
    /// Where members see this node's traffic come from (`host:port`).
    public var reflexive: [String]
    /// `none`, `easy`, `hard` or `unknown`.
    public var nat: String
    /// Whether this run resumed a membership from its data directory.
    public var resumed: Bool
    /// The session's admins (node keys; an extension of CONTROL.md, empty when the node does not say).
    public var admins: [String]

    init(_ r: ReplyFields) throws(ControlError) {
        member = try r.string("member")
        node = try r.string("node")
        name = try r.string("name")
        addr = try r.string("addr")
        session = try r.string("session")
        members = try r.int("members")
        clock = try r.clock("clock")
        baseline = try r.clock("baseline")
        uptimeMs = try r.int("uptime_ms")
        epoch = try r.int("epoch")
        reflexive = try r.strings("reflexive")
        nat = try r.string("nat")
        resumed = try r.bool("resumed")
        admins = try r.value("admins").isNull ? [] : r.strings("admins")
    }
}

/// One entry of a clock: a member and a broadcast seq.
public struct ControlClockEntry: Sendable, Equatable {
    public var member: String
    public var seq: Int64
    public init(member: String, seq: Int64) {
        self.member = member
        self.seq = seq
    }
}

/// A member as `members` and member events show it (CONTROL.md).
public struct ControlMember: Sendable, Equatable {
    public var member: String
    public var node: String
    public var name: String
    public var addr: String
    /// `alive`, `suspect`, `failed`, `left` or `removed`.
    public var state: String
    public var incarnation: Int64
    /// Whether this is the node answering.
    public var isSelf: Bool
    /// `direct`, `relayed`, `none` or `self`.
    public var path: String
    /// The relaying member when `relayed`.
    public var via: String?
    /// The smoothed round-trip time over `path`, when known.
    public var rttMs: Double?

    /// The member `object` describes, or `badReply` naming the field that is missing or ill-typed.
    public init(_ object: JSONObject) throws(ControlError) {
        let r = ReplyFields(object, what: "a member")
        member = try r.string("member")
        node = try r.string("node")
        name = try r.string("name")
        addr = try r.string("addr")
        state = try r.string("state")
        incarnation = try r.int("incarnation")
        isSelf = try r.bool("self")
        path = try r.string("path")
        via = try r.optionalString("via")
        rttMs = try r.optionalNumber("rtt_ms")
    }
}

/// What `send` answers: the message id, and its broadcast seq (nil for directed or unreliable sends).
public struct ControlSendReceipt: Sendable, Equatable {
    public var msg: String
    public var seq: Int64?
    public init(msg: String, seq: Int64?) {
        self.msg = msg
        self.seq = seq
    }
}

/// An attachment object (CONTROL.md).
public struct ControlAttachment: Sendable, Equatable {
    public var id: String
    public var name: String
    public var size: Int64
    public var meta: JSON
    /// The member that added it.
    public var from: String
    public var chunkSize: Int64
    public var chunks: Int64
    /// Chunks held here.
    public var have: Int64
    public var complete: Bool
    /// Members holding every chunk.
    public var holders: [String]
    /// `announced`, `replicated`, `unavailable` or `removed`.
    public var state: String

    /// The attachment `object` describes (in a reply or an event), or `badReply` naming the field
    /// that is missing or ill-typed.
    public init(_ object: JSONObject) throws(ControlError) {
        let r = ReplyFields(object, what: "an attachment")
        id = try r.string("id")
        name = try r.string("name")
        size = try r.int("size")
        meta = r.value("meta")
        from = try r.string("from")
        chunkSize = try r.int("chunk_size")
        chunks = try r.int("chunks")
        have = try r.int("have")
        complete = try r.bool("complete")
        holders = try r.strings("holders")
        state = try r.string("state")
    }
}

/// What `invite` answers: the code, the address to join, and how long the code lives.
public struct ControlInvitation: Sendable, Equatable {
    public var code: String
    public var addr: String
    public var expiresMs: Int64
    public init(code: String, addr: String, expiresMs: Int64) {
        self.code = code
        self.addr = addr
        self.expiresMs = expiresMs
    }
}

/// A participant (issue 38, an extension of CONTROL.md): a program taking part in an activity.
public struct ControlParticipant: Sendable, Equatable {
    /// The program id (16 hex digits).
    public var id: String
    public var member: String
    /// The node key of its member, hex (empty when the node does not know it).
    public var node: String
    public var name: String
    public var activity: String
    /// Whether it runs on the node answering.
    public var isSelf: Bool

    /// The participant `object` describes (in a reply or an event), or `badReply` naming the field
    /// that is missing or ill-typed.
    public init(_ object: JSONObject) throws(ControlError) {
        let r = ReplyFields(object, what: "a participant")
        id = try r.string("id")
        member = try r.string("member")
        node = try r.string("node")
        name = try r.string("name")
        activity = try r.string("activity")
        isSelf = try r.bool("self")
    }
}

extension ControlResponse {
    /// The result as the case asked for, or `badReply` (the request was of another op).
    private func expect<T>(_ what: String, _ pick: (ControlResult) -> T?) throws(ControlError) -> T {
        guard let value = pick(result) else { throw .badReply("expected \(what), got \(result)") }
        return value
    }

    public var status: ControlStatus {
        get throws(ControlError) { try expect("a status") { if case let .status(s) = $0 { s } else { nil } } }
    }
    public var members: [ControlMember] {
        get throws(ControlError) { try expect("members") { if case let .members(m) = $0 { m } else { nil } } }
    }
    public var sent: ControlSendReceipt {
        get throws(ControlError) { try expect("a send receipt") { if case let .sent(s) = $0 { s } else { nil } } }
    }
    public var cursor: Int64 {
        get throws(ControlError) { try expect("a cursor") { if case let .subscribed(c) = $0 { c } else { nil } } }
    }
    /// The report of `stats` or `diagnose`.
    public var report: JSONObject {
        get throws(ControlError) { try expect("a report") { if case let .report(r) = $0 { r } else { nil } } }
    }
    public var activity: (value: JSON, setBy: String?) {
        get throws(ControlError) { try expect("an activity") { if case let .activity(v, s) = $0 { (v, s) } else { nil } } }
    }
    /// The attachment of `attach.add`, or of `attach.get` when the node still knows it.
    public var attachment: ControlAttachment {
        get throws(ControlError) {
            try expect("an attachment") {
                switch $0 {
                case let .attachment(a), let .written(a?, _): a
                default: nil
                }
            }
        }
    }
    public var attachments: [ControlAttachment] {
        get throws(ControlError) { try expect("attachments") { if case let .attachments(a) = $0 { a } else { nil } } }
    }
    /// The epoch of `remove`, `rekey` or `admins`.
    public var epoch: Int64 {
        get throws(ControlError) {
            try expect("an epoch") {
                switch $0 {
                case let .epoch(e), let .admins(_, e): e
                default: nil
                }
            }
        }
    }
    public var invitation: ControlInvitation {
        get throws(ControlError) { try expect("an invitation") { if case let .invitation(i) = $0 { i } else { nil } } }
    }
    public var participant: ControlParticipant {
        get throws(ControlError) { try expect("a participant") { if case let .participant(p) = $0 { p } else { nil } } }
    }
    public var participants: [ControlParticipant] {
        get throws(ControlError) { try expect("participants") { if case let .participants(p) = $0 { p } else { nil } } }
    }
}

/// Reads the fields of one reply object, refusing a missing or ill-typed one with `badReply`
/// that names it and `what` was read.
struct ReplyFields {
    let object: JSONObject
    let what: String

    init(_ object: JSONObject, what: String) {
        self.object = object
        self.what = what
    }

    private func refuse(_ key: String, _ type: String) -> ControlError {
        .badReply("\(what) has no \"\(key)\" \(type)")
    }

    /// The value at `key`; null when absent.
    func value(_ key: String) -> JSON { object[key] ?? .null }

    func string(_ key: String) throws(ControlError) -> String {
        guard let s = object[key]?.stringValue else { throw refuse(key, "string") }
        return s
    }

    func optionalString(_ key: String) throws(ControlError) -> String? {
        if value(key).isNull { return nil }
        return try string(key)
    }

    func int(_ key: String) throws(ControlError) -> Int64 {
        guard let i = object[key]?.intValue else { throw refuse(key, "integer") }
        return i
    }

    func optionalInt(_ key: String) throws(ControlError) -> Int64? {
        if value(key).isNull { return nil }
        return try int(key)
    }

    func optionalNumber(_ key: String) throws(ControlError) -> Double? {
        switch value(key) {
        case .null: return nil
        case let .int(i): return Double(i)
        case let .double(d): return d
        default: throw refuse(key, "number")
        }
    }

    func bool(_ key: String) throws(ControlError) -> Bool {
        guard let b = object[key]?.boolValue else { throw refuse(key, "true or false") }
        return b
    }

    func object(_ key: String) throws(ControlError) -> JSONObject {
        guard let o = object[key]?.objectValue else { throw refuse(key, "object") }
        return o
    }

    func objects(_ key: String) throws(ControlError) -> [JSONObject] {
        guard let list = object[key]?.arrayValue else { throw refuse(key, "list") }
        return try list.map { (item: JSON) throws(ControlError) -> JSONObject in
            guard let o = item.objectValue else { throw refuse(key, "list of objects") }
            return o
        }
    }

    func strings(_ key: String) throws(ControlError) -> [String] {
        guard let list = object[key]?.arrayValue else { throw refuse(key, "list") }
        return try list.map { (item: JSON) throws(ControlError) -> String in
            guard let s = item.stringValue else { throw refuse(key, "list of strings") }
            return s
        }
    }

    /// A clock: an object of member → seq, in the node's order.
    func clock(_ key: String) throws(ControlError) -> [ControlClockEntry] {
        let o = try object(key)
        return try o.map { (pair: (String, JSON)) throws(ControlError) -> ControlClockEntry in
            guard let seq = pair.1.intValue else { throw refuse(key, "clock (member → seq)") }
            return ControlClockEntry(member: pair.0, seq: seq)
        }
    }
}
