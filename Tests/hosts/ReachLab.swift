import Foundation
import HuddleControl

/// The 5-host NAT lab of issue 36's acceptance: one public host, two behind `easy` routers, two
/// behind `hard` routers, every NATted member joining through the public one (or any other
/// `routers` list with the public host first). Shared by the host
/// test (`ReachLabScenarios`) and `huddle-bench --scenarios reach` (which compiles this file
/// through a symbolic link in Sources/huddle-bench/Lab), so both judge "linked" the same way.
///
/// Guarantees: `start` returns only once every node answers `status`; `pendingLink()` is nil
/// exactly when every node lists every other one `alive` on the path the design says the pair
/// must end on (`finalPath`), `via` the rendezvous (host 0) when relayed and no `via` when direct.
/// Host 0 is public, or (`forwardedRendezvous`, issue 36's "all NATted" case) behind a router
/// that forwards one port to it: no member is public then.
struct ReachLab {
    /// Host 0 public, 1–2 easy, 3–4 hard.
    static let fiveHosts: [Router] = [.public, .easy, .easy, .hard, .hard]
    static let easyPair = (1, 2)
    static let hardPair = (3, 4)

    /// The path hosts `i` and `j` must end on (README, "Hole punching"): an end everyone reaches
    /// (public, or behind its forwarded port) reaches the other directly; two `easy` NATs punch
    /// through to a direct path; a `hard` NAT at either end keeps the pair relayed (its mapping
    /// serves one destination, and the design does not guess ports).
    func finalPath(_ i: Int, _ j: Int) -> String {
        func reachable(_ k: Int) -> Bool { routers[k] == .public || lab.hosts[k].forwarded }
        if reachable(i) || reachable(j) { return "direct" }
        return routers[i] == .easy && routers[j] == .easy ? "direct" : "relayed"
    }

    let lab: HostLab
    let routers: [Router]
    let nodes: [HostNode]
    /// When the first node was launched (the namespaces and routers were built before).
    let launched: ContinuousClock.Instant
    /// When the last node answered `status`: on a loaded machine launching five processes one
    /// after the other can take longer than the protocol's part (42 s in one `make test` run).
    let allLaunched: ContinuousClock.Instant
    /// Host 0's node: the public member, or the one behind a forwarded port; all join through it.
    var publicNode: HostNode { nodes[0] }

    /// Builds the lab's namespaces and routers, then starts the public member and the NATted ones
    /// (in host order, each joining through the public one); `onStart` runs as each node answers
    /// `status`, before the next one is launched (a benchmark subscribes to its events there).
    /// `forwardedRendezvous`: host 0 sits behind its router (`routers[0]`, not `.public`) with
    /// port 7400 forwarded to it, and advertises the forwarded port.
    static func start(_ label: String, routers: [Router] = fiveHosts, forwardedRendezvous: Bool = false,
                      onStart: (HostNode) async throws -> Void = { _ in }) async throws -> ReachLab {
        precondition((routers.first == .public) != forwardedRendezvous && routers.count >= 2)
        let lab = try HostLab(label, hosts: routers.count, routers: routers, forwarded: forwardedRendezvous ? [0] : [])
        do {
            let launched = ContinuousClock.now
            var nodes: [HostNode] = []
            for i in routers.indices {
                nodes.append(try await lab.start(i, join: i == 0 ? [] : [0]))
                try await onStart(nodes[i])
            }
            return ReachLab(lab: lab, routers: routers, nodes: nodes, launched: launched, allLaunched: ContinuousClock.now)
        } catch {
            lab.teardown()
            throw error
        }
    }

    /// The first pair (as "x sees y: what") not yet on its final path, alive, with the right `via`;
    /// nil when every pair is, both ways.
    func pendingLink() async throws -> String? {
        for (i, x) in nodes.enumerated() {
            let list = try await x.request("members")["members"]?.arrayValue ?? []
            let byMember = Dictionary(list.compactMap(\.objectValue).map { ($0["member"]?.stringValue ?? "", $0) }, uniquingKeysWith: { a, _ in a })
            for (j, y) in nodes.enumerated() where j != i {
                let want = finalPath(i, j)
                guard let m = byMember[y.member] else { return "\(x.name) does not list \(y.name)" }
                let (state, path, via) = (m["state"]?.stringValue ?? "?", m["path"]?.stringValue ?? "?", m["via"]?.stringValue)
                let viaOK = want == "relayed" ? via == publicNode.member : m["via"] == .null || m["via"] == nil
                if state != "alive" || path != want || !viaOK {
                    return "\(x.name) sees \(y.name) \(state) \(path) via \(via ?? "-") (must be alive \(want)\(want == "relayed" ? " via \(publicNode.name)" : ""))"
                }
            }
        }
        return nil
    }

    /// Waits until `pendingLink()` is nil; throws with the last pair still pending after `seconds`.
    func waitUntilLinked(within seconds: Double, every interval: Duration = .milliseconds(100)) async throws {
        var last = "not asked yet"
        do {
            try await eventually("all \(nodes.count) members linked on their final paths", within: seconds, every: interval) {
                guard let pending = try await pendingLink() else { return true }
                last = pending
                return false
            }
        } catch {
            throw LabError(description: "\(error); still pending: \(last)")
        }
    }
}
