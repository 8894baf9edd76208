import HuddleControl

/// The control connections of one program to one node: requests, and one event subscription that
/// survives a lost connection.
///
/// Guarantees: after a lost connection the subscription resumes from the cursor of the last event
/// it delivered (CONTROL.md `subscribe since`), so no retained event is lost or repeated; when the
/// node behind the path is a new run (another member id), or no node answers for
/// `reconnectTimeout`, the update stream ends with the reason instead.
actor NodeConnection {
    /// What the subscription delivers: the node's events in cursor order, then at most one end.
    enum Update: Sendable {
        case event(JSONObject)
        case ended(HuddleKitError)
    }

    let path: String
    let reconnectTimeout: Duration
    /// The member this program talks to; a node answering with another one is a restart.
    private(set) var member = ""
    private var requests: ControlClient?
    private var events: ControlClient?
    private var pump: Task<Void, Never>?
    /// The connection this program's participant lives on (`participant.join`): the node ends the
    /// participant when it closes.
    private var presence: ControlClient?
    /// What `participant.join` asked, to take the same participant again after a lost connection.
    private var presenceJoin: ControlRequest?
    private var stopped = false
    /// The cursor of the last event delivered: where a resumed subscription starts.
    private(set) var lastCursor: Int64 = 0
    /// How many times the subscription was resumed after a lost connection.
    private(set) var resumes = 0

    init(path: String, reconnectTimeout: Duration) {
        self.path = path
        self.reconnectTimeout = reconnectTimeout
    }

    /// Connects and reads the node's `status`; remembers its member.
    func open() async throws(HuddleKitError) -> ControlStatus {
        let status = try await status()
        member = status.member
        return status
    }

    /// The node's `status`.
    private func status() async throws(HuddleKitError) -> ControlStatus {
        do { return try await request(.status).status } catch { throw HuddleKitError.from(error) }
    }

    /// One request on the shared connection (reconnected when it was lost). With `dedicated`, on a
    /// connection of its own, for requests that may wait long (`attach.get`, `attach.add`, `leave`)
    /// so they do not hold up the ones behind them (a connection answers in order).
    func request(_ request: ControlRequest, dedicated: Bool = false) async throws(HuddleKitError) -> ControlResponse {
        if stopped { if case .leave = request {} else { throw .left } }
        let client: ControlClient
        do {
            if dedicated {
                client = try await ControlClient.connect(path: path)
            } else if let requests {
                client = requests
            } else {
                let fresh = try await ControlClient.connect(path: path)
                if let requests { await fresh.close(); client = requests } else { requests = fresh; client = fresh }
            }
        } catch {
            throw HuddleKitError.from(error)
        }
        do {
            let reply = try await client.request(request)
            if dedicated { await client.close() }
            return reply
        } catch {
            if dedicated { await client.close() } else if (error as? ControlError)?.code == .closed, requests === client { requests = nil }
            throw HuddleKitError.from(error)
        }
    }

    /// Subscribes to every topic from `since` (nil: from now on) and returns the cursor the node
    /// was at and the stream of updates. Call once.
    func subscribe(since: Int64?) async throws(HuddleKitError) -> (cursor: Int64, updates: AsyncStream<Update>) {
        let (client, cursor) = try await openSubscription(since: since)
        lastCursor = since ?? cursor
        let (updates, continuation) = AsyncStream.makeStream(of: Update.self)
        pump = Task { await self.run(client, continuation) }
        return (cursor, updates)
    }

    /// Makes this program a participant of `activity` as program `program` (`participant.join`)
    /// on a connection of its own, kept open until `stop()`; taken again on the new connection
    /// after a lost one.
    func joinAsParticipant(activity: String, program: String) async throws(HuddleKitError) {
        presenceJoin = .participantJoin(activity: activity, program: program)
        try await openPresence()
    }

    private func openPresence() async throws(HuddleKitError) {
        guard let join = presenceJoin, !stopped else { return }
        let client: ControlClient
        do { client = try await ControlClient.connect(path: path) } catch { throw HuddleKitError.from(error) }
        do {
            _ = try await client.request(join)
            await presence?.close()
            presence = client
        } catch {
            await client.close()
            throw HuddleKitError.from(error)
        }
    }

    private func openSubscription(since: Int64?) async throws(HuddleKitError) -> (ControlClient, Int64) {
        let client: ControlClient
        do { client = try await ControlClient.connect(path: path) } catch { throw HuddleKitError.from(error) }
        // Every topic CONTROL.md lists, and the participants (an extension: named, never by default),
        // in binary frames (an extension, README "Binary event frames": a message's body raw, no
        // base64 or JSON made for it at the node; `ControlClient` reads either).
        let topics = ControlTopic.defaults.union([.participants])
        do {
            let cursor = try await client.request(.subscribe(topics: topics, since: since, encoding: .binary)).cursor
            events = client
            return (client, cursor)
        } catch {
            await client.close()
            throw HuddleKitError.from(error)
        }
    }

    /// Delivers events until stopped; on a lost connection or an overflow, resumes from `lastCursor`.
    private func run(_ first: ControlClient, _ out: AsyncStream<Update>.Continuation) async {
        var client = first
        while true {
            do {
                for try await event in await client.events() {
                    // The node dropped this subscriber: resume after the last event delivered
                    // (that is `lastCursor`, whatever the node had queued beyond it).
                    if event["event"]?.stringValue == "overflow" { break }
                    if let cursor = event["cursor"]?.intValue {
                        guard cursor > lastCursor else { continue }
                        lastCursor = cursor
                    }
                    out.yield(.event(event))
                }
            } catch {}
            await client.close()
            if stopped { out.finish(); return }
            switch await reconnect() {
            case let .success(next):
                client = next
                resumes += 1
            case let .failure(reason):
                out.yield(.ended(reason))
                out.finish()
                return
            }
        }
    }

    /// Tries to subscribe again from `lastCursor` until `reconnectTimeout` passes.
    private func reconnect() async -> Result<ControlClient, HuddleKitError> {
        let deadline = ContinuousClock.now + reconnectTimeout
        var pause = Duration.milliseconds(20)
        var last = HuddleKitError.noNode(path: path)
        while !stopped {
            requests = nil
            do {
                if try await status().member != member { return .failure(.nodeRestarted) }
                let (client, _) = try await openSubscription(since: lastCursor)
                // The participant is taken again (the node moves it to the new connection).
                _ = try await openPresence()
                return .success(client)
            } catch {
                last = error
            }
            if ContinuousClock.now >= deadline { return .failure(last) }
            try? await Task.sleep(for: pause)
            pause = min(pause * 2, .seconds(1))
        }
        return .failure(.left)
    }

    /// Closes the connections as a node going away would (the node stays up): the subscription
    /// resumes by itself. Tests use it to check resumption.
    func dropConnections() async {
        await events?.close()
        await requests?.close()
        await presence?.close()
        requests = nil
    }

    /// Ends the subscription and closes every connection.
    func stop() async {
        stopped = true
        pump?.cancel()
        await presence?.close()
        presence = nil
        await events?.close()
        await requests?.close()
        requests = nil
    }
}
