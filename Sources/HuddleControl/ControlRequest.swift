import Foundation

/// How a subscription's events are written: JSON lines (CONTROL.md, the default) or binary frames
/// (`EventFrame`; README, "Binary event frames").
public enum ControlEncoding: String, Sendable, Equatable {
    case lines, binary
}

/// An event topic a client can subscribe to (CONTROL.md, `subscribe`).
public enum ControlTopic: String, Sendable, CaseIterable {
    case members, messages, attachments, activity
    /// Pairing attempts on this member's invitations (an extension of CONTROL.md): sent only to
    /// a subscriber that names it, so the default subscription stays what CONTROL.md lists.
    case invite
    /// Programs joining and leaving activities (issue 38, an extension of CONTROL.md): sent only to
    /// a subscriber that names it, like `invite`.
    case participants

    /// What `subscribe` without `topics` means: every topic CONTROL.md lists.
    public static let defaults: Set<ControlTopic> = [.members, .messages, .attachments, .activity]
}

/// One control request, decoded from its line and checked: one case per op the node serves, with
/// typed fields. Guarantees: a value of this type carries only what CONTROL.md allows for its op
/// (types, required fields, the 16 KiB activity limit); anything else was refused by `decode`
/// with `bad_request` (or `too_large`) naming the field. What needs the node's state to check
/// (whether a member or an attachment exists) is checked by the node.
public enum ControlRequest: Sendable, Equatable {
    case status
    case members
    case join(addr: String)
    case send(Send)
    /// `encoding` is an extension (README, "Binary event frames"): JSON lines unless asked.
    case subscribe(topics: Set<ControlTopic>, since: Int64?, encoding: ControlEncoding = .lines)
    case stats
    case activityGet
    case activitySet(value: JSON)
    case attachAdd(path: String, name: String?, meta: JSON)
    case attachList
    /// `mode`: the exported file's permission bits when asked (an extension of CONTROL.md: the
    /// octal string `"644"`); nil means 0600, readable by this user only.
    case attachGet(id: String, path: String, wait: Bool, timeoutMs: Int64?, mode: Int?)
    case attachRemove(id: String)
    case leave(timeoutMs: Int64?)
    /// A one-time pairing code: valid for `ttlMs` (default 600,000), for `uses` pairings (default 1).
    case invite(ttlMs: Int64?, uses: Int?)
    /// Removes a member (a member id, 16 hex digits) or a node key (64 hex digits) from the
    /// session for good and rotates the session key to everyone else (issue 21).
    case remove(member: String)
    /// Rotates the session key, removing nobody.
    case rekey
    /// The session's admin set (issue 33, an extension of CONTROL.md): with `add` or `remove` (node
    /// keys, 64 hex digits), an admin moves the session to a new epoch with that admin set changed;
    /// with neither, the current set is only read.
    case admins(add: [String], remove: [String])
    /// What `huddle doctor` asks (an extension of CONTROL.md): the node's own checks, as facts
    /// (key file mode, reachability of each advertised address, epochs, store, subscribers).
    case diagnose
    /// The program on this connection joins `activity` as a participant (issue 38, an extension of
    /// CONTROL.md): until `participant.leave`, or until this connection closes. `program`: the
    /// program id to take again (16 hex digits, after a lost connection); nil for a new one.
    case participantJoin(activity: String, program: String?)
    /// The program `program` (16 hex digits) of this node is no longer a participant.
    case participantLeave(program: String)
    /// The participants this node knows, of every activity or of `activity`.
    case participants(activity: String?)

    /// What `send` asked for: the body, the recipients (member ids, 16 hex digits; nil for all).
    public struct Send: Sendable, Equatable {
        public var body: [UInt8]
        public var to: [String]?
        public var reliable: Bool
        /// How many leading bytes of `body` came from the request's `envelope` field (issue 38).
        public var envelope: Int
        public init(body: [UInt8], to: [String]?, reliable: Bool, envelope: Int = 0) {
            self.body = body; self.to = to; self.reliable = reliable; self.envelope = envelope
        }
    }

    /// Longest an invitation may live, and most pairings one may allow.
    public static let maximumInviteTTLMs: Int64 = 7 * 24 * 3600 * 1000
    public static let maximumInviteUses = 100

    /// The largest `activity.set` value, serialized.
    public static let maximumActivityBytes = 16 * 1024

    /// A request line: its `id` (null when absent or unusable) and the request, or the error to
    /// answer with. Never throws: every line gets exactly one reply.
    public static func parse(_ line: [UInt8]) -> (id: JSON, request: Result<ControlRequest, ControlError>) {
        let object: JSONObject
        do {
            guard case let .object(o) = try JSON.parse(line) else {
                return (.null, .failure(ControlError(.badRequest, "a request must be a JSON object")))
            }
            object = o
        } catch {
            return (.null, .failure(ControlError(.badRequest, "request is not valid JSON: \(error)")))
        }
        let id = object["id"] ?? .null
        switch id {
        case .array, .object: return (.null, .failure(ControlError(.badRequest, "\"id\" must be a JSON scalar")))
        default: break
        }
        do throws(ControlError) {
            return (id, .success(try decode(object)))
        } catch {
            return (id, .failure(error))
        }
    }

    /// The request an object states (its `op` and fields).
    public static func decode(_ r: JSONObject) throws(ControlError) -> ControlRequest {
        guard let op = r["op"]?.stringValue else { throw bad("request has no \"op\" string") }
        switch op {
        case "status": return .status
        case "members": return .members
        case "stats": return .stats
        case "attach.list": return .attachList
        case "activity.get": return .activityGet
        case "join":
            guard let addr = r["addr"]?.stringValue else { throw bad("join needs \"addr\" (host:port)") }
            return .join(addr: addr)
        case "send": return .send(try decodeSend(r))
        case "subscribe": return try decodeSubscribe(r)
        case "activity.set":
            guard let value = r["value"] else { throw bad("activity.set needs \"value\" (any JSON)") }
            var bytes: [UInt8] = []
            value.write(into: &bytes)
            guard bytes.count <= maximumActivityBytes else {
                throw ControlError(.tooLarge, "activity value is \(bytes.count) bytes; the limit is \(maximumActivityBytes)")
            }
            return .activitySet(value: value)
        case "attach.add":
            guard let path = r["path"]?.stringValue else { throw bad("attach.add needs \"path\" (an absolute file path)") }
            if let name = r["name"], name.stringValue == nil, !name.isNull { throw bad("\"name\" must be a string") }
            return .attachAdd(path: path, name: r["name"]?.stringValue, meta: r["meta"] ?? .null)
        case "attach.get":
            guard let id = r["id"]?.stringValue, let path = r["path"]?.stringValue else {
                throw bad("attach.get needs \"id\" and \"path\" (an absolute output path)")
            }
            return .attachGet(id: id, path: path, wait: try optionalBool(r, "wait") ?? true, timeoutMs: try optionalMilliseconds(r, "timeout_ms"),
                              mode: try optionalMode(r, "mode"))
        case "attach.remove":
            guard let id = r["id"]?.stringValue else { throw bad("attach.remove needs \"id\"") }
            return .attachRemove(id: id)
        case "leave": return .leave(timeoutMs: try optionalMilliseconds(r, "timeout_ms"))
        case "rekey": return .rekey
        case "admins": return .admins(add: try nodeKeys(r, "add"), remove: try nodeKeys(r, "remove"))
        case "diagnose": return .diagnose
        case "participant.join":
            guard let activity = r["activity"]?.stringValue else { throw bad("participant.join needs \"activity\" (a string)") }
            // `program`, not `id`: `id` names the request (CONTROL.md).
            var program: String?
            if let field = r["program"], !field.isNull {
                guard let text = field.stringValue, isMemberID(text) else { throw bad("\"program\" must be a program id (16 hex digits)") }
                program = text
            }
            return .participantJoin(activity: activity, program: program)
        case "participant.leave":
            guard let program = r["program"]?.stringValue, isMemberID(program) else {
                throw bad("participant.leave needs \"program\" (a program id, 16 hex digits)")
            }
            return .participantLeave(program: program)
        case "participants":
            if let field = r["activity"], !field.isNull, field.stringValue == nil { throw bad("\"activity\" must be a string") }
            return .participants(activity: r["activity"]?.stringValue)
        case "remove":
            guard let target = r["member"]?.stringValue, isMemberID(target) || isNodeKey(target) else {
                throw bad("remove needs \"member\": a member id (16 hex digits) or a node key (64 hex digits)")
            }
            return .remove(member: target)
        case "invite":
            let ttl = try optionalMilliseconds(r, "ttl_ms")
            if let ttl, ttl < 1_000 || ttl > maximumInviteTTLMs { throw bad("\"ttl_ms\" must be between 1000 and \(maximumInviteTTLMs) (7 days)") }
            var uses: Int?
            if let field = r["uses"], !field.isNull {
                guard let value = field.intValue, (1...Int64(maximumInviteUses)).contains(value) else { throw bad("\"uses\" must be between 1 and \(maximumInviteUses)") }
                uses = Int(value)
            }
            return .invite(ttlMs: ttl, uses: uses)
        default: throw bad("unknown op \"\(op)\"")
        }
    }

    private static func bad(_ message: String) -> ControlError { ControlError(.badRequest, message) }

    /// An optional list of node keys (64 hex digits each), empty when absent.
    private static func nodeKeys(_ r: JSONObject, _ field: String) throws(ControlError) -> [String] {
        guard let value = r[field], !value.isNull else { return [] }
        guard let list = value.arrayValue, list.count <= 64 else { throw bad("\"\(field)\" must be a list of at most 64 node keys") }
        return try list.map { (item: JSON) throws(ControlError) -> String in
            guard let text = item.stringValue, isNodeKey(text) else { throw bad("\"\(field)\" holds \(item.serialized), not a node key (64 hex digits)") }
            return text.lowercased()
        }
    }

    /// A member id as the control protocol writes it: 16 hex digits.
    public static func isMemberID(_ text: String) -> Bool {
        text.utf8.count == 16 && text.utf8.allSatisfy { $0.isHexDigit }
    }

    /// A node key as the control protocol writes it: 64 hex digits.
    public static func isNodeKey(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { $0.isHexDigit }
    }

    private static func decodeSend(_ r: JSONObject) throws(ControlError) -> Send {
        let body: [UInt8]
        switch (r["text"], r["data"]) {
        case let (.string(text)?, nil): body = Array(text.utf8)
        case let (nil, .string(b64)?):
            guard let data = Data(base64Encoded: b64) else { throw bad("\"data\" is not valid base64") }
            body = Array(data)
        default: throw bad("send needs exactly one of \"text\" (string) or \"data\" (base64 string)")
        }
        var to: [String]?
        if let field = r["to"], !field.isNull {
            guard let list = field.arrayValue else { throw bad("\"to\" must be a list of members") }
            to = try list.map { (item: JSON) throws(ControlError) -> String in
                guard let text = item.stringValue, isMemberID(text) else {
                    throw bad("\"to\" holds \(item.serialized), not a member id (16 hex digits)")
                }
                return text
            }
        }
        var envelope: [UInt8] = []
        if let field = r["envelope"], !field.isNull {
            guard let b64 = field.stringValue, let data = Data(base64Encoded: b64) else { throw bad("\"envelope\" must be base64") }
            guard data.count <= maximumEnvelopeBytes else {
                throw ControlError(.tooLarge, "envelope is \(data.count) bytes; the limit is \(maximumEnvelopeBytes)")
            }
            envelope = Array(data)
        }
        // Without an envelope the body is the one decoded above: `[] + body` would copy it again.
        return Send(body: envelope.isEmpty ? body : envelope + body, to: to, reliable: try optionalBool(r, "reliable") ?? true, envelope: envelope.count)
    }

    /// The largest `send` envelope (SessionCore.envelopeAllowance; HuddleControl does not link HuddleCore).
    public static let maximumEnvelopeBytes = 1024

    private static func decodeSubscribe(_ r: JSONObject) throws(ControlError) -> ControlRequest {
        var topics = ControlTopic.defaults
        if let field = r["topics"], !field.isNull {
            guard let list = field.arrayValue else { throw bad("\"topics\" must be a list") }
            topics = try Set(list.map(topic))
        }
        var since: Int64?
        if let field = r["since"], !field.isNull {
            guard let value = field.intValue, value >= 0 else { throw bad("\"since\" must be a cursor (a non-negative integer)") }
            since = value
        }
        var encoding = ControlEncoding.lines
        if let field = r["encoding"], !field.isNull {
            guard let name = field.stringValue, let asked = ControlEncoding(rawValue: name) else {
                throw bad("\"encoding\" must be \"lines\" or \"binary\"")
            }
            encoding = asked
        }
        return .subscribe(topics: topics, since: since, encoding: encoding)
    }

    /// The topic `item` names, or the `bad_request` a node answers a subscription naming it with.
    public static func topic(_ item: JSON) throws(ControlError) -> ControlTopic {
        guard let name = item.stringValue, let topic = ControlTopic(rawValue: name) else {
            throw bad("unknown topic \(item.serialized) (topics: members, messages, attachments, activity, invite, participants)")
        }
        return topic
    }

    private static func optionalBool(_ r: JSONObject, _ key: String) throws(ControlError) -> Bool? {
        guard let field = r[key], !field.isNull else { return nil }
        guard let value = field.boolValue else { throw bad("\"\(key)\" must be true or false") }
        return value
    }

    /// Permission bits written in octal as a string (`"644"`, `"0600"`): rwx for user, group and
    /// others, nothing else (no setuid, setgid or sticky bit).
    private static func optionalMode(_ r: JSONObject, _ key: String) throws(ControlError) -> Int? {
        guard let field = r[key], !field.isNull else { return nil }
        return try permissionBits(field, key)
    }

    /// The permission bits `value` writes in octal, or the `bad_request` a node answers `field`
    /// holding it with.
    public static func permissionBits(_ value: JSON, _ field: String = "mode") throws(ControlError) -> Int {
        guard let text = value.stringValue, (1...4).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x37).contains($0) }),
              let bits = Int(text, radix: 8), bits <= 0o777
        else { throw bad("\"\(field)\" must be permission bits in octal, as a string from \"000\" to \"777\" (such as \"644\")") }
        return bits
    }

    private static func optionalMilliseconds(_ r: JSONObject, _ key: String) throws(ControlError) -> Int64? {
        guard let field = r[key], !field.isNull else { return nil }
        guard let value = field.intValue, value >= 0 else { throw bad("\"\(key)\" must be a non-negative number of milliseconds") }
        return value
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool { (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self) }
}
