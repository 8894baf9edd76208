import Foundation
import HuddleControl
import HuddleCore
import NIOCore

/// The `diagnose` op (an extension of CONTROL.md, what `huddle doctor` asks): the node checks what
/// only it can — its key file's mode, whether each advertised address (its own included) answers
/// over TCP and UDP from here, each member's state, last heard and epoch, each linked member's
/// round-trip time and clock skew (a fresh time exchange on every link: `LinkTiming`), its store
/// against its limit, its event subscribers' backlogs — and reports facts; `Diagnosis` turns them
/// into findings.
extension Node {
    /// Most members probed by one `diagnose` (the table is bounded anyway; this bounds the sockets).
    static let diagnoseProbeLimit = 64
    /// Each probe's bound: the whole op stays well inside the doctor's 5 s.
    static let diagnoseTCPTimeout = TimeAmount.milliseconds(1500)
    static let diagnoseUDPTimeout = TimeAmount.milliseconds(500)
    /// How long after it asked the op waits for the answers to its time requests (while the
    /// probes run, then alone): a member that answers later is shown with its last estimate.
    static let diagnoseTimingWait = Duration.milliseconds(1000)

    func diagnose() async -> JSONObject {
        let asked = ContinuousClock.now
        execute(core.measureLinks(now: now))
        let members = swim.members.values.sorted { $0.id < $1.id }
        let probed = Array(members.filter { $0.id == local.id || ($0.state != .left && !core.removedMembers.contains($0.id)) }.prefix(Self.diagnoseProbeLimit))
        // The probes run off the actor's state: only addresses go in.
        let addresses = probed.map { ($0.id, $0.addr) }
        async let udp = AddressProbe.udp(addresses.map(\.1), timeout: Self.diagnoseUDPTimeout)
        let tcp = await withTaskGroup(of: (MemberID, AddressProbe.Outcome).self) { group in
            for (id, addr) in addresses {
                group.addTask { (id, await AddressProbe.tcp(addr, timeout: Self.diagnoseTCPTimeout)) }
            }
            var all: [MemberID: AddressProbe.Outcome] = [:]
            for await (id, outcome) in group { all[id] = outcome }
            return all
        }
        let udpByMember = Dictionary(zip(addresses.map(\.0), await udp), uniquingKeysWith: { first, _ in first })
        // The store's size and the key file's mode are looked up off the actor.
        let store = self.store, keyPath = config.keyPath
        let (storeUsed, keyFile) = (try? await BulkWork.run { (store.usedBytes(), Self.keyFileJSON(keyPath)) }) ?? (0, .null)
        while links.keys.contains(where: { core.timing.isPending($0) }), ContinuousClock.now < asked + Self.diagnoseTimingWait, mayWait {
            await wait(for: .timing, until: asked + Self.diagnoseTimingWait)
        }
        let nowSeconds = now
        let rows: [JSON] = members.map { info in
            var row: JSONObject = ["member": .string(info.id.description), "name": .string(info.name), "addr": .string(info.addr),
                                   "self": .bool(info.id == local.id)]
            if case let .object(m) = memberJSON(info) { row["state"] = m["state"] ?? .null }
            row["linked"] = .bool(links[info.id] != nil)
            row["last_heard_ms"] = swim.lastHeard(from: info.id).map { .int(Int64(min(max(0, (nowSeconds - $0) * 1000), 1e15))) } ?? .null
            row["epoch"] = info.id == local.id ? .int(Int64(clamping: core.epoch)) : peerEpoch(info.id)
            if let probe = tcp[info.id] { row["tcp"] = probe.json }
            if let probe = udpByMember[info.id] { row["udp"] = probe.json }
            let timing = core.timing.estimates[info.id]
            row["rtt_ms"] = milliseconds(timing?.roundTrip)
            row["clock_skew_ms"] = milliseconds(timing?.skew)
            row["clock_skew_error_ms"] = milliseconds(timing?.skewError)
            return .object(row)
        }
        let largestSkew = core.timing.estimates.values.map(\.skew).max { abs($0) < abs($1) }
        let backlogs = events.subscriberBacklogs
        return [
            "key_file": keyFile,
            "listen": .string("\(config.listenHost):\(config.listenPort)"),
            "addr": .string(local.addr),
            "epoch": .int(Int64(clamping: core.epoch)),
            "members": .array(rows),
            "store": .object(["used": .int(Int64(storeUsed)), "limit": .int(Int64(config.storeLimitBytes))]),
            "subscribers": .array(backlogs.map { .object(["events_behind": .int($0.events), "overflow_risk": .double($0.risk)]) }),
            "clock_skew_ms": milliseconds(largestSkew),
            "joining": .array(joinFailures.sorted { $0.key < $1.key }.map { addr, failure in
                .object(["addr": .string(addr), "seconds": .int(Int64((ContinuousClock.now - failure.since).components.seconds)),
                         "error": .string(String(failure.error.prefix(200)))])
            }),
        ]
    }

    /// A `--join` address failed (`NodeRunner.joinInBackground`): kept until one answers, for `diagnose`.
    func joinFailed(_ addr: String, error: String) {
        joinFailures[addr] = (joinFailures[addr]?.since ?? .now, error)
    }

    /// A join through one of `addresses` was answered: they are no longer waited on.
    func joinAnswered(_ addresses: [String]) {
        for addr in addresses { joinFailures[addr] = nil }
    }

    /// The epoch `peer` said it is on, when this node knows that epoch; `"other"` for a head not
    /// on this node's chain (a later epoch, or a branch), null when the peer has not said.
    private func peerEpoch(_ peer: MemberID) -> JSON {
        guard let head = core.peerHeads[peer] else { return .null }
        let chain = core.epochs.chain
        guard let index = chain.lastIndex(of: head) else { return .string("other") }
        let behind = UInt64(chain.count - 1 - index)
        return behind <= core.epoch ? .int(Int64(clamping: core.epoch - behind)) : .string("other")
    }

    /// The key file's path and mode (on `BulkWork`).
    private nonisolated static func keyFileJSON(_ keyPath: String) -> JSON {
        IOThreads.check("the key file's stat")
        var info = stat()
        guard stat(keyPath, &info) == 0 else {
            return .object(["path": .string(keyPath), "mode": .null, "error": .string(String(cString: strerror(errno)))])
        }
        return .object(["path": .string(keyPath), "mode": .string(String(info.st_mode & 0o777, radix: 8))])
    }
}
