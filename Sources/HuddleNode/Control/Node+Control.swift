import Foundation
import HuddleControl
import HuddleCore
import HuddleCrypto

extension Node {
    /// Answers request lines in order, queueing each reply on the connection; the connection's
    /// writer is woken once for the lot (and before any request that may wait, so earlier replies
    /// are not held back by it).
    func handleControl(_ items: [LineSplitter.Item], on connection: ControlConnection) async {
        defer {
            flushAfterVisit()
            connection.outbox.wake()
        }
        for item in items {
            let reply: JSONObject?
            switch item {
            case let .line(line): reply = await handleControl(line, on: connection)
            case .tooLong:
                reply = ControlReply.error(id: .null, ControlError(.badRequest, "request line exceeds \(ControlServer.maximumLine) bytes"))
            }
            if let reply {
                var bytes: [UInt8] = []
                bytes.reserveCapacity(96)
                JSON.object(reply).write(into: &bytes)
                bytes.append(0x0A)
                connection.queueReply(bytes, wake: false)
            }
        }
    }

    /// Answers one request line. Returns the reply to queue, or nil when the handler queued it
    /// itself (subscribe queues its reply before the events that follow it).
    func handleControl(_ line: [UInt8], on connection: ControlConnection) async -> JSONObject? {
        let (id, parsed) = ControlRequest.parse(line)
        let request: ControlRequest
        switch parsed {
        case let .success(decoded): request = decoded
        case let .failure(error): return ControlReply.error(id: id, error)
        }
        // Replies so far go out now, before a request that may wait; a send that will not wait
        // (nothing congested) leaves them for the batch.
        if case .send = request, !broadcast.isCongested {} else { connection.outbox.wake() }
        // Requests that make events here at once wait for a spool writer that is behind (`send`
        // waits in `send`); the rest — reads, `diagnose`, `leave` — never wait for the disk.
        if Self.makesEvents(request) { await waitForEventWriter() }
        do throws(ControlError) {
            return try await answer(request, id: id, on: connection)
        } catch {
            return ControlReply.error(id: id, error)
        }
    }

    /// Whether carrying out `request` makes events here at once (`send` waits for the spool's
    /// writer itself, after its commit wait).
    private static func makesEvents(_ request: ControlRequest) -> Bool {
        switch request {
        case .activitySet, .attachAdd, .attachRemove, .participantJoin, .participantLeave, .remove, .rekey, .admins: true
        case .status, .members, .join, .send, .subscribe, .stats, .activityGet, .attachList, .attachGet, .leave, .invite,
             .diagnose, .participants: false
        }
    }

    /// Carries out one request; nil when the reply was queued already.
    private func answer(_ request: ControlRequest, id: JSON, on connection: ControlConnection) async throws(ControlError) -> JSONObject? {
        switch request {
        case .status: return ControlReply.ok(id: id, status())
        case .members: return ControlReply.ok(id: id, ["members": .array(swim.members.values.sorted { $0.id < $1.id }.map(memberJSON))])
        case let .join(addr): return ControlReply.ok(id: id, try await joinOp(addr))
        case let .send(send):
            let m = try await self.send(SendRequest(body: send.body, envelope: send.envelope, to: send.to?.compactMap(MemberID.init), reliable: send.reliable))
            let seq = core.applicationSeqs.view(m).seq
            return ControlReply.ok(id: id, ["msg": .string(m.id), "seq": seq == 0 ? .null : .int(Int64(clamping: seq))])
        case let .subscribe(topics, since, encoding):
            // The reply in the connection's encoding so far; what follows it in the one asked for.
            var reply: [UInt8] = []
            // `encoding` in the reply only when binary: a client sees the node took it (JSON lines stay as they were).
            JSON.object(ControlReply.ok(id: id, encoding == .binary ? ["cursor": .int(events.latest), "encoding": .string(encoding.rawValue)]
                                                                    : ["cursor": .int(events.latest)])).write(into: &reply)
            reply.append(0x0A)
            connection.queueReply(reply)
            connection.setFramed(encoding == .binary)
            connection.setRefill { [weak self] connection in Task { await self?.feedSubscriber(connection) } }
            readEventFilesOffActor()
            events.subscribe(connection, topics: topics, since: since, binary: encoding == .binary)
            return nil
        case .stats: return ControlReply.ok(id: id, stats())
        case .activityGet: return ControlReply.ok(id: id, activityFields())
        case let .activitySet(value):
            setActivity(value)
            return ControlReply.ok(id: id, [:])
        case let .attachAdd(path, name, meta):
            return ControlReply.ok(id: id, try await addAttachment(path: path, name: name, meta: meta))
        case .attachList:
            return ControlReply.ok(id: id, ["attachments": .array(attachments.keys.sorted().map { attachmentJSON($0) })])
        case let .attachGet(attachment, path, wait, timeoutMs, mode):
            let timeout = timeoutMs.map { Duration.milliseconds($0) } ?? .seconds(3600)
            return ControlReply.ok(id: id, try await getAttachment(attachment, to: path, wait: wait, timeout: timeout, mode: mode.map { mode_t($0) } ?? 0o600))
        case let .attachRemove(attachment):
            try removeAttachment(attachment)
            return ControlReply.ok(id: id, [:])
        case let .invite(ttlMs, uses): return ControlReply.ok(id: id, invite(ttlMs: ttlMs, uses: uses))
        case let .remove(member): return ControlReply.ok(id: id, try await removeOp(member))
        case .rekey: return ControlReply.ok(id: id, try await rekeyOp())
        case let .admins(add, remove): return ControlReply.ok(id: id, try await adminsOp(add: add, remove: remove))
        case .diagnose: return ControlReply.ok(id: id, await diagnose())
        case let .participantJoin(activity, program): return ControlReply.ok(id: id, try joinProgram(activity: activity, id: program, on: connection))
        case let .participantLeave(program):
            try leaveProgram(program)
            return ControlReply.ok(id: id, [:])
        case let .participants(activity): return ControlReply.ok(id: id, ["participants": .array(participantsJSON(activity: activity))])
        case let .leave(timeoutMs):
            let handedOff = await handOff(.request(handOffWait: timeoutMs.map { Double($0) / 1000 }))
            var reply: [UInt8] = []
            JSON.object(ControlReply.ok(id: id, ["handed_off": .int(Int64(handedOff))])).write(into: &reply)
            reply.append(0x0A)
            connection.queueReply(reply)
            await leave()
            return nil
        }
    }

    private func status() -> JSONObject {
        [
            "member": .string(local.id.description),
            "node": .string(hexString(local.node)),
            "name": .string(local.name),
            "addr": .string(local.addr),
            "session": .string(currentKey.fingerprint),
            "members": .int(Int64(liveCount)),
            "clock": clockJSON(core.applicationClock(broadcast.delivered)),
            "baseline": clockJSON(core.applicationClock(broadcast.baseline)),
            "uptime_ms": .int(Int64(now * 1000)),
            // The session key's epoch in use here (0 before any rotation; issue 21).
            "epoch": .int(Int64(clamping: core.epoch)),
            // This run took up a membership from its data directory (CONTROL.md, Restart).
            "resumed": .bool(resumed),
            // Where members see this node's traffic come from, and its NAT kind (issue 36).
            "reflexive": .array(core.reflexive.map(JSON.string)),
            "nat": .string(core.nat.rawValue),
            // The current epoch's admin set, the session's signed state (issue 33; empty: none).
            "admins": .array(core.epochs.admins.map { .string(hexString($0)) }),
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
            "unreliable_dropped": .int(Int64(counters.unreliableDropped.load(ordering: .relaxed))),
            "messages_forged": .int(Int64(counters.forged.load(ordering: .relaxed))),
            "messages_held": .int(Int64(broadcast.heldCount)),
            "messages_stored": .int(Int64(broadcast.storedCount)),
            "duplicates": .int(Int64(broadcast.duplicates)),
            "broadcasts_lost": .int(Int64(clamping: broadcast.gapSeqs)),
            "links": .int(Int64(links.count)),
            "dropped_frames": .int(Int64(counters.droppedFrames.load(ordering: .relaxed))),
            "dropped_datagrams": .int(Int64(counters.droppedDatagrams.load(ordering: .relaxed))),
            "datagram_send_errors": .int(Int64(counters.datagramSendErrors.load(ordering: .relaxed))),
            "link_rekeys_sent": .int(Int64(counters.linkRekeysSent.load(ordering: .relaxed))),
            "link_rekeys_received": .int(Int64(counters.linkRekeysReceived.load(ordering: .relaxed))),
            "refused": .object(refusalsJSON()),
            "relay": .object(relayJSON()),
            // File calls made off the node's I/O threads (on its actor): 0 unless a file call
            // was left on the actor (`IOThreads`; issue 35, item 4).
            "blocking_file_io": .int(Int64(IOThreads.offThreadCalls)),
            // Batch signatures checked on links' readers, not on the actor (`Node.checkSignatures`).
            "signatures_checked_off_actor": .int(Int64(originNodeKeys.checkedOffActor.load(ordering: .relaxed))),
        ]
    }

    /// This member as a relay and as an end of circuits (README, "Relaying"): circuits it carries,
    /// bytes it forwarded, circuit requests and bytes it refused by reason, its own relayed links,
    /// hole punching (`punch`: dials made, direct links they brought, punch messages refused).
    private func relayJSON() -> JSONObject {
        let relay = core.relay
        var refused: JSONObject = [:]
        for reason in RelayCircuits.Refusal.allCases { refused[reason.rawValue] = .int(Int64(relay.refusals[reason, default: 0])) }
        return [
            "circuits": .int(Int64(relay.circuits.count)),
            "forwarded_bytes": .int(Int64(relay.forwardedBytes)),
            "refused": .object(refused),
            "relayed_links": .int(Int64(links.values.count { $0.via != nil })),
            "corrupted": .int(Int64(relayCorruption.flipped)),
            // The test-only hostile relay (`RelayCorruption`): messages it changed, dropped or held,
            // and sightings of the scanned text in what it forwarded.
            "tampered": .int(Int64(relayCorruption.tampered)),
            "plaintext_seen": .int(Int64(relayCorruption.sightings)),
            "stalled": .int(Int64(core.routes.stalls)),
            "punch": .object(["attempts": .int(Int64(core.punch.attempts)), "successes": .int(Int64(core.punch.successes)),
                              "refused": .int(Int64(core.punch.refused))]),
        ]
    }

    private func joinOp(_ addr: String) async throws(ControlError) -> JSONObject {
        do {
            // The user's address: a hostname is looked up off the actor (`PeerAddress`).
            let peer = try await link(to: try await PeerAddress.resolveUserAddress(addr))
            guard await pushPullAndWait(peer, join: true) else { throw NodeError("the link closed before its member answered") }
        } catch let error as NodeError {
            throw ControlError(.unavailable, "could not join \(addr): \(error.message)")
        } catch {
            throw ControlError(.unavailable, "could not join \(addr): \(error)")
        }
        return ["members": .int(Int64(liveCount))]
    }
}

extension Node {
    /// A control connection closed: its subscription ends and its programs stop being participants.
    func connectionClosed(_ connection: ControlConnection) {
        events.unsubscribe(connection)
        endPrograms(of: connection)
    }

    /// The writer of a subscriber's connection took its queued lines: queue the next window.
    func feedSubscriber(_ connection: ControlConnection) { events.feed(connection) }
}
