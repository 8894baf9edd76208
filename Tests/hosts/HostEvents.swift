import Foundation
import HuddleTestSupport
import HuddleControl
import HuddleSim
import Testing

/// One event with the moment it reached the test.
struct StampedEvent: Sendable {
    let at: ContinuousClock.Instant
    let event: JSONObject
}

/// Every event one node streams, collected in the background. Survives `overflow` (resubscribes
/// with `since`) and a stalled or vanished node (keeps retrying until stopped); events are never
/// counted twice (cursors only move forward).
///
/// A stream that ended or failed, or a resubscription that failed, is recorded (`disconnects`):
/// events may be missing until a resubscription replays them. So a check that something did NOT
/// happen first calls `catchUp()`, which waits until every event the node had logged by then (of
/// this reader's topics) has been collected, whatever happened to the stream.
actor HostEvents {
    let node: HostNode
    private let topics: [String]
    private(set) var events: [StampedEvent] = []
    private(set) var overflows = 0
    /// Why the stream ended before `stop()`, each time it did (and each failed resubscription).
    private(set) var disconnects: [String] = []
    private var cursor: Int64?
    private var task: Task<Void, Never>?

    private init(node: HostNode, topics: [String]) {
        self.node = node
        self.topics = topics
    }

    /// Subscribes now (the subscription is in place when this returns) and keeps collecting.
    /// `since`: replay every retained event after that cursor first (0: from the node's first
    /// event), for a check about something that may have happened before this subscription.
    static func subscribe(_ node: HostNode, topics: [String], since: Int64? = nil) async throws -> HostEvents {
        let collector = HostEvents(node: node, topics: topics)
        await collector.startAt(since)
        let client = try await collector.connect()
        await collector.start(client)
        return collector
    }

    private func startAt(_ since: Int64?) { cursor = since }

    private func connect() async throws -> ControlClient {
        let client = try await node.client()
        var fields: JSONObject = ["topics": .array(topics.map { .string($0) })]
        if let cursor { fields["since"] = .int(cursor) }
        do {
            let reply = try await client.ask("subscribe", fields)
            if cursor == nil, let now = reply["cursor"]?.intValue { cursor = now }
        } catch {
            await client.close()
            throw error
        }
        return client
    }

    private func start(_ first: ControlClient) {
        task = Task {
            var client: ControlClient? = first
            while !Task.isCancelled {
                if client == nil {
                    do {
                        client = try await connect()
                    } catch {
                        if !Task.isCancelled { disconnects.append("resubscribing failed: \(error)") }
                        try? await Task.sleep(for: .milliseconds(200))
                        continue
                    }
                }
                guard let c = client else { continue }
                do {
                    var overflowed = false
                    for try await event in await c.events() {
                        if event["event"]?.stringValue == "overflow" {
                            overflows += 1
                            overflowed = true
                            if let resume = event["resume"]?.intValue { cursor = resume }
                            break
                        }
                        add(event)
                    }
                    if !overflowed && !Task.isCancelled { disconnects.append("the node closed the stream") }
                } catch {
                    if !Task.isCancelled { disconnects.append("the stream failed: \(error)") }
                }
                await c.close()
                client = nil
            }
            await client?.close()
        }
    }

    private func add(_ event: JSONObject) {
        if let c = event["cursor"]?.intValue {
            if let cursor, c <= cursor { return }
            cursor = c
        }
        events.append(StampedEvent(at: .now, event: event))
    }

    /// Waits until every event the node has logged by now, of this reader's topics, is collected:
    /// asks the node for its latest cursor over a subscription of its own to every topic from this
    /// reader's cursor, and reads that subscription's replay up to the latest cursor, adding what
    /// the stream itself missed. Throws when the node does not answer or the replay does not reach
    /// the latest cursor within `seconds` (then nothing may be concluded from what is missing).
    func catchUp(within seconds: Double = 30) async throws {
        let client = try await node.client()
        defer { Task { await client.close() } }
        for event in try await EventReplay.upToNow(client, node: node.name, from: cursor ?? 0, topics: Set(topics), within: seconds) { add(event) }
    }

    func stop() {
        task?.cancel()
        task = nil
    }

    func messages() -> [JSONObject] { events.map(\.event).filter { $0["event"]?.stringValue == "message" } }

    /// Member events of kind `change` (about `member` when given), with their arrival times.
    func memberChanges(_ change: String, about member: String? = nil) -> [StampedEvent] {
        memberChanges([change], about: member)
    }

    /// The `member` events whose change is one of `changes`, in order.
    func memberChanges(_ changes: Set<String>, about member: String? = nil) -> [StampedEvent] {
        events.filter {
            $0.event["event"]?.stringValue == "member" && changes.contains($0.event["change"]?.stringValue ?? "")
                && (member == nil || $0.event["member"]?.objectValue?["member"]?.stringValue == member)
        }
    }
}

/// Fails the test for each stream that overflowed: the reader survives an overflow (it
/// resubscribes from the cursor it had), but an overflow means the node dropped the subscriber
/// and the scenario's verdicts would rest on a replay it did not plan for; none should happen.
func expectNoOverflows(_ streams: [HostEvents], sourceLocation: SourceLocation = #_sourceLocation) async {
    for stream in streams {
        let overflows = await stream.overflows
        #expect(overflows == 0, "\(stream.node.name)'s event stream overflowed \(overflows) time(s)", sourceLocation: sourceLocation)
    }
}

/// A delivered message as its `message` event reports it.
struct Delivered: Equatable {
    let msg: String, from: String, seq: Int64?, deps: [String: Int64], text: String
    init?(_ event: JSONObject) {
        guard event["event"]?.stringValue == "message", let msg = event["msg"]?.stringValue,
              let from = event["from"]?.stringValue else { return nil }
        self.msg = msg
        self.from = from
        seq = event["seq"]?.intValue
        var deps: [String: Int64] = [:]
        for (k, v) in event["deps"]?.objectValue ?? [:] { deps[k] = v.intValue ?? 0 }
        self.deps = deps
        text = event["text"]?.stringValue ?? ""
    }

    var record: DeliveryRecord {
        DeliveryRecord(msg: msg, from: from, seq: seq.map { UInt64($0) }, deps: deps.mapValues { UInt64($0) })
    }
}

/// Waits (up to `seconds`) until every stream delivered as many messages as were `sent`, then
/// checks that each delivered exactly the texts `sent`, each once, in causal order
/// (`deliveryViolations`). Returns the problems found, a wait that ran out included.
func everyMessageOnce(_ streams: [HostEvents], sent: Set<String>, within seconds: Double) async throws -> [String] {
    let total = sent.count
    do {
        try await eventually("all \(total) messages at every member", within: seconds, every: .milliseconds(250)) {
            for stream in streams where await stream.messages().count < total { return false }
            return true
        }
    } catch {
        var counts: [String] = []
        for stream in streams { counts.append("\(stream.node.name)=\(await stream.messages().count)") }
        return ["\(error); delivered: \(counts.joined(separator: " "))"]
    }
    var problems = try await deliveryViolations(streams)
    for stream in streams {
        let texts = await stream.messages().compactMap(Delivered.init).map(\.text)
        if texts.count != total { problems.append("\(stream.node.name) delivered \(texts.count) messages, not \(total)") }
        if Set(texts) != sent { problems.append("\(stream.node.name) delivered texts nobody sent, or missed some") }
    }
    return problems
}

/// Runs the shared DeliveryChecker (HuddleSim) over what each node's event stream delivered:
/// exactly once, seq contiguous per sender after `status.baseline`, dependencies first, and no
/// loss among the nodes given.
func deliveryViolations(_ streams: [HostEvents]) async throws -> [String] {
    var logs: [DeliveryLog] = []
    for stream in streams {
        try await stream.catchUp()
        let status = try await stream.node.request("status")
        var baseline: [String: UInt64] = [:]
        for (k, v) in status["baseline"]?.objectValue ?? [:] { baseline[k] = UInt64(v.intValue ?? 0) }
        let delivered = await stream.messages().compactMap(Delivered.init).map(\.record)
        logs.append(DeliveryLog(member: stream.node.name, baseline: baseline, deliveries: delivered, stayed: true))
    }
    return DeliveryChecker.violations(logs)
}

/// `x`'s `members` entry for `y`, nil when `x` does not list it.
func member(_ x: HostNode, _ y: HostNode) async throws -> JSONObject? {
    let list = try await x.request("members")["members"]?.arrayValue ?? []
    return list.compactMap(\.objectValue).first { $0["member"]?.stringValue == y.member }
}

/// Whether `x` sees `y` alive over a link relayed by `relay`.
func isRelayed(_ x: HostNode, _ y: HostNode, via relay: HostNode) async throws -> Bool {
    let m = try await member(x, y)
    return m?["path"]?.stringValue == "relayed" && m?["via"]?.stringValue == relay.member && m?["state"]?.stringValue == "alive"
}
