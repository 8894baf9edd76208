import HuddleControl

/// What `GroupActivity.sessions()` runs: follows the node's activity and yields a new session for
/// each activation of `A` it sees (the current one first).
///
/// Guarantees: one session per activation id, never two; an ended activation yields none; a node
/// that is down is waited for (every 250 ms) and a lost connection re-subscribed, until cancelled.
struct SessionsWatcher<A: GroupActivity>: Sendable {
    let control: String

    func run(into out: AsyncStream<GroupSession<A>>.Continuation) async {
        var seen: Set<String> = []
        while !Task.isCancelled {
            do { try await follow(&seen, out) } catch {}
            try? await Task.sleep(for: .milliseconds(250))
        }
        out.finish()
    }

    /// Subscribes to activity events, then reads the current value (so nothing falls between),
    /// and yields a session for each new activation until the connection ends.
    private func follow(_ seen: inout Set<String>, _ out: AsyncStream<GroupSession<A>>.Continuation) async throws {
        let events = try await ControlClient.connect(path: control)
        defer { Task { await events.close() } }
        _ = try await events.request(.subscribe(topics: [.activity], since: nil))
        let reader = try await ControlClient.connect(path: control)
        let current = try await reader.request(.activityGet).activity
        await reader.close()
        try await offer(current.value, setBy: current.setBy, &seen, out)
        for try await event in await events.events() where event["event"]?.stringValue == "activity" {
            try await offer(event["activity"] ?? .null, setBy: event["set_by"]?.stringValue, &seen, out)
        }
    }

    private func offer(_ value: JSON, setBy: String?, _ seen: inout Set<String>,
                       _ out: AsyncStream<GroupSession<A>>.Continuation) async throws {
        guard let activation = ActivityValue.activation(of: value, as: A.self), !ActivityValue.isEnded(value),
              GroupSession<A>.decodeActivity(value) != nil else { return }
        let key = activation.isEmpty ? value.serialized : activation
        guard seen.insert(key).inserted else { return }
        let session = try await GroupSession<A>.connect(control: control)
        session.hub.adopt(activity: value, activation: activation, setBy: setBy)
        out.yield(session)
    }
}
