import Foundation

extension ControlRequest {
    /// The `op` this request is sent as (CONTROL.md).
    public var op: String {
        switch self {
        case .status: "status"
        case .members: "members"
        case .join: "join"
        case .send: "send"
        case .subscribe: "subscribe"
        case .stats: "stats"
        case .activityGet: "activity.get"
        case .activitySet: "activity.set"
        case .attachAdd: "attach.add"
        case .attachList: "attach.list"
        case .attachGet: "attach.get"
        case .attachRemove: "attach.remove"
        case .leave: "leave"
        case .invite: "invite"
        case .remove: "remove"
        case .rekey: "rekey"
        case .admins: "admins"
        case .diagnose: "diagnose"
        case .participantJoin: "participant.join"
        case .participantLeave: "participant.leave"
        case .participants: "participants"
        }
    }

    /// The request object CONTROL.md defines, the inverse of `decode`: `op`, then `id`, then the
    /// op's fields in CONTROL.md's order, each optional one only when it differs from what its
    /// absence means (so `decode(encoded(id:)) == self` for every request `decode` returns).
    ///
    /// `id` is the request's id (omitted when nil), except for `attach.get` and `attach.remove`,
    /// whose `id` field names the attachment (CONTROL.md): that field is the request's id there,
    /// as a node echoes it. A `send` body is written as `text` when it is valid UTF-8, else as
    /// base64 `data` (the node reads both as the same bytes); its first `envelope` bytes as the
    /// base64 `envelope` field. Values `decode` would refuse are written as they are, for the
    /// node to refuse: encoding never fails and never traps.
    public func encoded(id: JSON? = nil) -> JSONObject {
        var o: JSONObject = ["op": .string(op)]
        if let id { o["id"] = id }
        switch self {
        case .status, .members, .stats, .activityGet, .attachList, .rekey, .diagnose: break
        case let .join(addr): o["addr"] = .string(addr)
        case let .send(send): Self.encode(send, into: &o)
        case let .subscribe(topics, since, encoding):
            if topics != ControlTopic.defaults { o["topics"] = .array(ControlTopic.allCases.filter(topics.contains).map { .string($0.rawValue) }) }
            if let since { o["since"] = .int(since) }
            if encoding != .lines { o["encoding"] = .string(encoding.rawValue) }
        case let .activitySet(value): o["value"] = value
        case let .attachAdd(path, name, meta):
            o["path"] = .string(path)
            if let name { o["name"] = .string(name) }
            if meta != .null { o["meta"] = meta }
        case let .attachGet(attachment, path, wait, timeoutMs, mode):
            o["id"] = .string(attachment)
            o["path"] = .string(path)
            if !wait { o["wait"] = false }
            if let timeoutMs { o["timeout_ms"] = .int(timeoutMs) }
            if let mode { o["mode"] = .string(String(mode, radix: 8)) }
        case let .attachRemove(attachment): o["id"] = .string(attachment)
        case let .leave(timeoutMs): if let timeoutMs { o["timeout_ms"] = .int(timeoutMs) }
        case let .invite(ttlMs, uses):
            if let ttlMs { o["ttl_ms"] = .int(ttlMs) }
            if let uses { o["uses"] = .int(Int64(uses)) }
        case let .remove(member): o["member"] = .string(member)
        case let .admins(add, remove):
            if !add.isEmpty { o["add"] = .array(add.map(JSON.string)) }
            if !remove.isEmpty { o["remove"] = .array(remove.map(JSON.string)) }
        case let .participantJoin(activity, program):
            o["activity"] = .string(activity)
            if let program { o["program"] = .string(program) }
        case let .participantLeave(program): o["program"] = .string(program)
        case let .participants(activity): if let activity { o["activity"] = .string(activity) }
        }
        return o
    }

    /// The request line: `encoded(id:)` serialized, ending in `\n`.
    public func line(id: JSON? = nil) -> [UInt8] {
        var bytes: [UInt8] = []
        JSON.object(encoded(id: id)).write(into: &bytes)
        bytes.append(0x0A)
        return bytes
    }

    private static func encode(_ send: Send, into o: inout JSONObject) {
        let split = min(max(send.envelope, 0), send.body.count)
        let body = send.body[split...]
        if let text = String(validating: body, as: UTF8.self) {
            o["text"] = .string(text)
        } else {
            o["data"] = .string(Data(body).base64EncodedString())
        }
        if let to = send.to { o["to"] = .array(to.map(JSON.string)) }
        if !send.reliable { o["reliable"] = false }
        if split > 0 { o["envelope"] = .string(Data(send.body[..<split]).base64EncodedString()) }
    }
}
