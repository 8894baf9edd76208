/// What `huddle doctor` says about a node's `diagnose` report: one finding per problem, each a
/// line a user can act on; none when healthy. Pure: the report's facts in, sentences out.
public enum Diagnosis {
    /// A store this full (fraction of its limit) is a finding.
    public static let storeFullFraction = 0.9
    /// A subscriber this near an overflow (`overflow_risk`) is behind.
    public static let subscriberBehindRisk = 0.5
    /// A member's clock this far from this node's (milliseconds, beyond the measurement's own
    /// error) is a finding. Hosts that keep time (NTP) agree within tens of milliseconds, so 2 s
    /// means a host whose time sync is off, not noise; and it is where the skew starts to show to
    /// people: the activity's last-writer-wins order reads the wall clock (a hybrid logical clock),
    /// so of two sets made within the skew of each other, the one from the host ahead wins even
    /// when it came first, and at seconds people take turns within that; the nodes' logs disagree
    /// by as much. (A member more than `ActivityRegister.maximumSkew`, 30 s, ahead has its sets
    /// refused until the receiver's clock catches up.)
    public static let clockSkewMs = 2000.0

    public static func findings(_ report: JSONObject) -> [String] {
        var out: [String] = []
        if case let .object(key)? = report["key_file"] {
            let path = key["path"]?.stringValue ?? "the key file"
            if let mode = key["mode"]?.stringValue, let bits = Int(mode, radix: 8) {
                if bits & 0o077 != 0 {
                    out.append("key file \(path) has mode \(String(repeating: "0", count: max(0, 4 - mode.count)))\(mode): others on this host can read the session key; run: chmod 600 \(path)")
                }
            } else {
                out.append("key file \(path) cannot be checked (\(key["error"]?.stringValue ?? "no mode")): the node rewrites it at each epoch; make sure it exists and is the node's")
            }
        }
        // Alone, with a `--join` address that does not answer (issue 36: no member reachable).
        let others = (report["members"]?.arrayValue ?? []).compactMap(\.objectValue).filter {
            $0["self"] != .bool(true) && ["alive", "suspect"].contains($0["state"]?.stringValue ?? "")
        }
        if others.isEmpty {
            for case let .object(join) in report["joining"]?.arrayValue ?? [] {
                let seconds = join["seconds"]?.intValue.map { "\($0) s" } ?? "a while"
                out.append("this node has joined no session: --join \(join["addr"]?.stringValue ?? "?") has not answered for \(seconds) (\(join["error"]?.stringValue ?? "no answer")): "
                    + "a member must be reachable from here, one with a public address or one behind a router that forwards its port (TCP and UDP) to it and runs with --advertise ROUTER_ADDRESS:PORT")
            }
        }
        let epoch = report["epoch"]?.intValue
        for case let .object(m) in report["members"]?.arrayValue ?? [] {
            out += memberFindings(m, epoch: epoch)
        }
        if case let .object(store)? = report["store"], let used = store["used"]?.intValue, let limit = store["limit"]?.intValue,
           limit > 0, Double(used) >= storeFullFraction * Double(limit) {
            out.append("the store holds \(used) of its \(limit) bytes (\(Int(Double(used) * 100 / Double(limit)))%): new chunks will be refused; raise --store-limit or remove attachments")
        }
        let behind = (report["subscribers"]?.arrayValue ?? []).compactMap(\.objectValue).filter {
            (number($0["overflow_risk"]) ?? 0) >= subscriberBehindRisk
        }
        if !behind.isEmpty {
            let most = behind.compactMap { $0["events_behind"]?.intValue }.max() ?? 0
            out.append("\(behind.count) event subscriber\(behind.count == 1 ? " is" : "s are") falling behind (up to \(most) events unread): it will get an overflow; read events faster or subscribe to fewer topics")
        }
        return out
    }

    private static func memberFindings(_ m: JSONObject, epoch: Int64?) -> [String] {
        let id = m["member"]?.stringValue ?? "?"
        let addr = m["addr"]?.stringValue ?? "?"
        let isSelf = m["self"] == .bool(true)
        let who = isSelf ? "this node" : "member \(m["name"]?.stringValue ?? "?") (\(id))"
        let state = m["state"]?.stringValue ?? "?"
        if !isSelf, state == "left" || state == "removed" { return [] }
        var out: [String] = []
        for transport in ["tcp", "udp"] {
            guard case let .object(probe)? = m[transport], probe["ok"] == .bool(false) else { continue }
            let why = probe["error"]?.stringValue ?? "no answer"
            let fix = isSelf ? "members cannot reach it there; fix --advertise (or the firewall or port forwarding)"
                             : "fix its --advertise, or the firewall between the two"
            out.append("\(who) advertises \(addr), unreachable over \(transport.uppercased()) from this node (\(why)): \(fix)")
        }
        guard !isSelf else { return out }
        let heard = m["last_heard_ms"]?.intValue.map { "last heard \(Double($0) / 1000) s ago" } ?? "never heard over a link"
        if state == "suspect" || state == "failed" {
            out.append("\(who) at \(addr) is \(state) (\(heard)): check it is running and reachable")
        }
        if let skew = number(m["clock_skew_ms"]), abs(skew) - (number(m["clock_skew_error_ms"]) ?? 0) > clockSkewMs {
            let seconds = (abs(skew) / 100).rounded() / 10
            out.append("the clock of \(who) is \(seconds) s \(skew > 0 ? "ahead of" : "behind") this node's: activity sets within that of each other are ordered by the clocks, not as they were made, and logs disagree; sync both hosts' clocks (NTP, e.g. timedatectl set-ntp true)")
        }
        if let epoch, let theirs = m["epoch"]?.intValue, theirs < epoch {
            out.append("\(who) is on epoch \(theirs), behind this node's \(epoch): it does not hold the current session key; check its links (it is handed the key when it links), or remove it")
        } else if m["epoch"]?.stringValue == "other" {
            out.append("\(who) is on an epoch this node does not hold: this node may be behind; check its links")
        }
        return out
    }

    /// A report's number, integer or not (nil for anything else).
    public static func number(_ value: JSON?) -> Double? {
        switch value {
        case let .int(i)?: Double(i)
        case let .double(d)?: d
        default: nil
        }
    }
}
