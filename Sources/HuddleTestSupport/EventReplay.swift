import HuddleControl

/// A node's event log read back up to now, over a subscription of its own: what a test's event
/// reader takes before it concludes that something did not happen (a live stream may lag, have
/// stalled, or have died). Guarantee: `upToNow` returns every event of the asked topics the node
/// logged after `from` and up to its latest cursor at the time of the call, or throws — never a
/// partial replay.
public enum EventReplay {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The events of `topics` after cursor `from`, up to the latest cursor when asked, read over
    /// `client` (a connection of the caller's own, which this subscribes to every topic and closes
    /// when `seconds` pass first). `node` names the node in errors.
    public static func upToNow(_ client: ControlClient, node: String, from: Int64, topics: Set<String>,
                               within seconds: Double) async throws -> [JSONObject] {
        let latest = try await client.request(.subscribe(topics: Set(ControlTopic.allCases), since: from)).cursor
        guard latest > from else { return [] }
        let replay = Task { () -> [JSONObject] in
            var got: [JSONObject] = []
            for try await event in await client.events() {
                if event["event"]?.stringValue == "overflow" { throw Failure(description: "\(node): the catch-up replay overflowed") }
                guard let cursor = event["cursor"]?.intValue else { continue }
                got.append(event)
                if cursor >= latest { return got }
            }
            throw Failure(description: "\(node): the catch-up replay ended before cursor \(latest)")
        }
        let timer = Task {
            try await Task.sleep(for: .seconds(seconds))
            replay.cancel()
            await client.close()
        }
        defer { timer.cancel() }
        do {
            return try await replay.value.filter { topics.contains(topic(of: $0).rawValue) }
        } catch {
            throw Failure(description: "\(node): could not catch up from cursor \(from) to \(latest) within \(seconds) s: \(error)")
        }
    }

    /// The topic an event belongs to, by its name (CONTROL.md).
    public static func topic(of event: JSONObject) -> ControlTopic {
        switch event["event"]?.stringValue ?? "" {
        case "member": .members
        case "message": .messages
        case "activity": .activity
        case "invite", "pairing": .invite
        default: .attachments
        }
    }
}
