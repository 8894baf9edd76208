import Foundation
import HuddleControl

extension Scenarios {
    /// Removal (issue 21): N nodes; while node 0 sends timestamped broadcasts, node 1 removes the
    /// last node. Measures the time from the `remove` request until every remaining node's `status`
    /// shows the new epoch, and the broadcast latency (median / p99) at the remaining nodes while
    /// the session switches (from just before the request until every node is on the new epoch).
    func removal(n: Int) async throws -> [BenchRow] {
        let cluster = try HuddleCluster(binary: huddle, label: "rm\(n)")
        defer { cluster.stop() }
        try await cluster.start(n)
        let controls = cluster.controls
        let target = cluster.members[n - 1]
        let remaining = Array(controls.prefix(n - 1))
        let done = DoneFlag()
        let switchover = Task { () throws -> Double in
            defer { done.set() }
            // Probes run a moment before the request, so the switch falls inside them.
            try await Task.sleep(for: .milliseconds(500))
            let started = ContinuousClock.now
            _ = try await HuddleCluster.ask(controls[1], .remove(member: target))
            try await waitFor("every remaining node on epoch 1", seconds: 120) {
                for control in remaining where try await HuddleCluster.ask(control, .status).status.epoch != 1 { return false }
                return true
            }
            return (ContinuousClock.now - started).seconds
        }
        let samples = try await collectLatencies(cluster, count: 100_000, receivers: Set(1..<(n - 1)), while: { !done.isSet })
        let seconds = try await switchover.value
        return [BenchRow(scenario: "removal N=\(n)", measure: "remove → every remaining member on the new epoch, s; 256 B broadcast median / p99 ms meanwhile",
                         huddle: "\(fmt(seconds, 2)) s; \(fmt(percentile(samples, 0.5))) / \(fmt(percentile(samples, 0.99))) ms (\(samples.count) samples)",
                         comparison: "serf: no removal (serf keys rotates, strands offline members, cannot evict a key holder)", ratio: "", target: "")]
    }
}
