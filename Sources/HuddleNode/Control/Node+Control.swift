import Foundation
import HuddleControl
import HuddleCore
import HuddleCrypto

extension Node {
    /// Answers request lines in order, queueing each reply on the connection; the connection's
    /// writer is woken once for the lot (and before any request that may wait, so earlier replies
    /// are not held back by it).
    func handleControl(_ items: [LineSplitter.Item], on connection: ControlConnection) async {
        defer { connection.outbox.wake() }
        for item in items {
            let reply: JSONObject?
            switch item {
            case let .line(line): reply = await handleControl(line, on: connection)
            case .tooLong:
                reply = ControlReply.error(id: .null, ControlError(code: .badRequest, message: "request line exceeds \(ControlServer.maximumLine) bytes"))
            }
            if let reply {
                var bytes: [UInt8] = []
                bytes.reserveCapacity(96)
                JSON.object(reply).write(into: &bytes)
                bytes.append(0x0A)
                connection.outbox.push(bytes, bytes: bytes.count, wake: false)
            }
        }
    }

    /// Answers one request line. Returns the reply to queue, or nil when the handler queued it
    /// itself (subscribe queues its reply before the events that follow it).
    func handleControl(_ line: [UInt8], on connection: ControlConnection) async -> JSONObject? {
        let request: JSONObject
        do {
            guard case let .object(object) = try JSON.parse(line) else {
                return ControlReply.error(id: .null, ControlError(code: .badRequest, message: "a request must be a JSON object"))
            }
            request = object
        } catch {
            return ControlReply.error(id: .null, ControlError(code: .badRequest, message: "request is not valid JSON: \(error)"))
        }
        let id = request["id"] ?? .null
        if case .array = id { return ControlReply.error(id: .null, ControlError(code: .badRequest, message: "\"id\" must be a JSON scalar")) }
        if case .object = id { return ControlReply.error(id: .null, ControlError(code: .badRequest, message: "\"id\" must be a JSON scalar")) }
        do {
            guard let op = request["op"]?.stringValue else { throw ControlError(code: .badRequest, message: "request has no \"op\" string") }
            if op != "send" || broadcast.isCongested { connection.outbox.wake() }
            switch op {
            case "status": return ControlReply.ok(id: id, status())
            case "members": return ControlReply.ok(id: id, ["members": .array(swim.members.values.sorted { $0.id < $1.id }.map(memberJSON))])
            case "join": return ControlReply.ok(id: id, try await joinOp(request))
            case "send":
                let m = try await send(try sendRequest(request))
                return ControlReply.ok(id: id, ["msg": .string(m.id), "seq": m.seq == 0 ? .null : .int(Int64(m.seq))])
            case "subscribe":
                let (topics, since) = try subscribeRequest(request)
                var reply: [UInt8] = []
                JSON.object(ControlReply.ok(id: id, ["cursor": .int(events.latest)])).write(into: &reply)
                reply.append(0x0A)
                connection.outbox.push(reply, bytes: reply.count)
                events.subscribe(connection, topics: topics, since: since)
                return nil
            case "stats": return ControlReply.ok(id: id, stats())
            case "activity.get": return ControlReply.ok(id: id, activityFields())
            case "activity.set":
                guard let value = request["value"] else { throw ControlError(code: .badRequest, message: "activity.set needs \"value\" (any JSON)") }
                var size: [UInt8] = []
                value.write(into: &size)
                guard size.count <= 16 * 1024 else { throw ControlError(code: .tooLarge, message: "activity value is \(size.count) bytes; the limit is 16384") }
                setActivity(value)
                return ControlReply.ok(id: id, [:])
            case "attach.add":
                guard let path = request["path"]?.stringValue else { throw ControlError(code: .badRequest, message: "attach.add needs \"path\" (an absolute file path)") }
                if let name = request["name"], name.stringValue == nil, !name.isNull { throw ControlError(code: .badRequest, message: "\"name\" must be a string") }
                return ControlReply.ok(id: id, try await addAttachment(path: path, name: request["name"]?.stringValue, meta: request["meta"] ?? .null))
            case "attach.list":
                let list = attachments.keys.sorted().map { attachmentJSON($0) }
                return ControlReply.ok(id: id, ["attachments": .array(list)])
            case "attach.get":
                guard let attachment = request["id"]?.stringValue, let path = request["path"]?.stringValue else {
                    throw ControlError(code: .badRequest, message: "attach.get needs \"id\" and \"path\" (an absolute output path)")
                }
                let wait = request["wait"]?.boolValue ?? true
                let timeout = request["timeout_ms"]?.intValue.map { Duration.milliseconds($0) } ?? .seconds(3600)
                return ControlReply.ok(id: id, try await getAttachment(attachment, to: path, wait: wait, timeout: timeout))
            case "attach.remove":
                guard let attachment = request["id"]?.stringValue else { throw ControlError(code: .badRequest, message: "attach.remove needs \"id\"") }
                try removeAttachment(attachment)
                return ControlReply.ok(id: id, [:])
            case "leave":
                let timeout = request["timeout_ms"]?.intValue.map { Duration.milliseconds(max(0, $0)) } ?? .seconds(30)
                let handedOff = await handOff(timeout: timeout)
                var reply: [UInt8] = []
                JSON.object(ControlReply.ok(id: id, ["handed_off": .int(Int64(handedOff))])).write(into: &reply)
                reply.append(0x0A)
                connection.outbox.push(reply, bytes: reply.count)
                await leave()
                return nil
            default:
                throw ControlError(code: .badRequest, message: "unknown op \"\(op)\"")
            }
        } catch let error as ControlError {
            return ControlReply.error(id: id, error)
        } catch {
            return ControlReply.error(id: id, ControlError(code: .internal, message: "\(error)"))
        }
    }

    private func status() -> JSONObject {
        [
            "member": .string(local.id.description),
            "node": .string(hexString(local.node)),
            "name": .string(local.name),
            "addr": .string(local.addr),
            "session": .string(security.sessionKey.fingerprint),
            "members": .int(Int64(liveCount)),
            "clock": clockJSON(broadcast.delivered),
            "baseline": clockJSON(broadcast.baseline),
            "uptime_ms": .int(Int64(now * 1000)),
        ]
    }

    private func stats() -> JSONObject {
        func bytes(_ pick: (NodeCounters.Kind) -> Int) -> JSON {
            let g = pick(.gossip), m = pick(.messages), c = pick(.chunks)
            return .object(["total": .int(Int64(g + m + c)), "gossip": .int(Int64(g)), "messages": .int(Int64(m)), "chunks": .int(Int64(c))])
        }
        // Datagram counts (not bytes): unreliable sends are one datagram per recipient ("messages").
        func datagrams(_ pick: (NodeCounters.Kind) -> Int) -> JSON {
            let g = pick(.gossip), m = pick(.messages)
            return .object(["total": .int(Int64(g + m)), "gossip": .int(Int64(g)), "messages": .int(Int64(m))])
        }
        return [
            "bytes_sent": bytes(counters.sent),
            "bytes_received": bytes(counters.received),
            "datagrams_sent": datagrams(counters.datagramsSent),
            "datagrams_received": datagrams(counters.datagramsReceived),
            "chunks_served": .int(Int64(counters.chunksServed.load(ordering: .relaxed))),
            "chunks_fetched": .int(Int64(counters.chunksFetched.load(ordering: .relaxed))),
            "chunks_corrupt": .int(Int64(counters.corruptChunks.load(ordering: .relaxed))),
            "messages_sent": .int(Int64(counters.messagesSent.load(ordering: .relaxed))),
            "messages_delivered": .int(Int64(counters.messagesDelivered.load(ordering: .relaxed))),
            "retransmits": .int(Int64(counters.retransmits.load(ordering: .relaxed))),
            "messages_forged": .int(Int64(counters.forged.load(ordering: .relaxed))),
            "messages_held": .int(Int64(broadcast.heldCount)),
            "messages_stored": .int(Int64(broadcast.storedCount)),
            "duplicates": .int(Int64(broadcast.duplicates)),
            "links": .int(Int64(links.count)),
            "dropped_frames": .int(Int64(counters.droppedFrames.load(ordering: .relaxed))),
            "dropped_datagrams": .int(Int64(counters.droppedDatagrams.load(ordering: .relaxed))),
            "datagram_send_errors": .int(Int64(counters.datagramSendErrors.load(ordering: .relaxed))),
        ]
    }

    private func joinOp(_ request: JSONObject) async throws(ControlError) -> JSONObject {
        guard let addr = request["addr"]?.stringValue else { throw ControlError(code: .badRequest, message: "join needs \"addr\" (host:port)") }
        do {
            let peer = try await dial(addr)
            await pushPullAndWait(peer, join: true)
        } catch let error as NodeError {
            throw ControlError(code: .unavailable, message: "could not join \(addr): \(error.message)")
        } catch {
            throw ControlError(code: .unavailable, message: "could not join \(addr): \(error)")
        }
        return ["members": .int(Int64(liveCount))]
    }

    private func sendRequest(_ request: JSONObject) throws(ControlError) -> SendRequest {
        let body: [UInt8]
        switch (request["text"], request["data"]) {
        case let (.string(text)?, nil): body = Array(text.utf8)
        case let (nil, .string(b64)?):
            guard let data = Data(base64Encoded: b64) else { throw ControlError(code: .badRequest, message: "\"data\" is not valid base64") }
            body = Array(data)
        default: throw ControlError(code: .badRequest, message: "send needs exactly one of \"text\" (string) or \"data\" (base64 string)")
        }
        var to: [MemberID]?
        if let field = request["to"], !field.isNull {
            guard let list = field.arrayValue else { throw ControlError(code: .badRequest, message: "\"to\" must be a list of members") }
            to = try list.map { (item: JSON) throws(ControlError) -> MemberID in
                guard let text = item.stringValue, let m = MemberID(text) else {
                    throw ControlError(code: .badRequest, message: "\"to\" holds \(item.serialized), not a member id (16 hex digits)")
                }
                return m
            }
        }
        var reliable = true
        if let field = request["reliable"], !field.isNull {
            guard let value = field.boolValue else { throw ControlError(code: .badRequest, message: "\"reliable\" must be true or false") }
            reliable = value
        }
        return SendRequest(body: body, to: to, reliable: reliable)
    }

    private func subscribeRequest(_ request: JSONObject) throws(ControlError) -> (Set<EventLog.Topic>, Int64?) {
        var topics = Set(EventLog.Topic.allCases)
        if let field = request["topics"], !field.isNull {
            guard let list = field.arrayValue else { throw ControlError(code: .badRequest, message: "\"topics\" must be a list") }
            topics = try Set(list.map { (item: JSON) throws(ControlError) -> EventLog.Topic in
                guard let name = item.stringValue, let topic = EventLog.Topic(rawValue: name) else {
                    throw ControlError(code: .badRequest, message: "unknown topic \(item.serialized) (topics: members, messages, attachments, activity)")
                }
                return topic
            })
        }
        var since: Int64?
        if let field = request["since"], !field.isNull {
            guard let value = field.intValue, value >= 0 else { throw ControlError(code: .badRequest, message: "\"since\" must be a cursor (a non-negative integer)") }
            since = value
        }
        return (topics, since)
    }
}

extension Node {
    func unsubscribe(_ connection: ControlConnection) { events.unsubscribe(connection) }
}
