import HuddleControl
import HuddleCore
import HuddleCrypto

extension Node {
    /// A member as the control protocol shows it (in `members` and in member events).
    func memberJSON(_ info: MemberInfo) -> JSON {
        .object([
            "member": .string(info.id.description),
            "node": .string(hexString(info.node)),
            "name": .string(info.name),
            "addr": .string(info.addr),
            "state": .string(core.removedMembers.contains(info.id) || (info.id == local.id && core.epochs.isRemoved) ? "removed" : info.state.description),
            "incarnation": .int(Int64(clamping: info.incarnation)),
            "self": .bool(info.id == local.id),
            // CONTROL.md's smoothed round-trip time: over the member's link (`LinkTiming`).
            "rtt_ms": milliseconds(core.timing.estimates[info.id]?.roundTrip),
            "path": .string(core.path(to: info.id).rawValue), "via": core.via(info.id).map { .string($0.description) } ?? .null,
        ])
    }

    /// Seconds as milliseconds to the hundredth (null for nil): what the reports show of `LinkTiming`.
    func milliseconds(_ seconds: Double?) -> JSON {
        guard let seconds, seconds.isFinite else { return .null }
        return .double((seconds * 100_000).rounded() / 100)
    }

    /// A `member` event; `by` (the member that removed it) only with `removed`.
    func emitMember(_ change: MemberChange, _ info: MemberInfo, by: MemberID? = nil) {
        memberEvents[change, default: 0] += 1
        if change == .joined || change == .left || change == .failed || change == .removed {
            log.info("member \(info.id) (\(info.name) at \(info.addr)) \(change.rawValue)\(by.map { " by \($0)" } ?? "")")
        } else if change == .path || change == .updated {
            // Rare (a path or a signed record changes): the moments a punch waits on, in the log.
            let path = core.path(to: info.id)
            log.info("member \(info.id) (\(info.name)) \(change.rawValue): path \(path.rawValue)\(core.via(info.id).map { " via \($0)" } ?? ""), reach \(info.reach)")
        }
        var fields: JSONObject = ["change": .string(change.rawValue), "member": memberJSON(info)]
        if change == .removed { fields["by"] = by.map { .string($0.description) } ?? .null }
        events.append("member", topic: .members, fields)
    }

    func clockJSON(_ clock: [MemberID: UInt64]) -> JSON {
        .object(JSONObject(pairs: clock.sorted { $0.key < $1.key }.map { ($0.key.description, JSON.int(Int64(clamping: $0.value))) }))
    }
}

extension JSONObject {
    init(pairs: some Sequence<(String, JSON)>) {
        self.init()
        for (key, value) in pairs { self[key] = value }
    }
}
