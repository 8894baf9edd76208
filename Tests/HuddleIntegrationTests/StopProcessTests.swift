import Foundation
import HuddleControl
import HuddleTestSupport
import Testing

/// A stop is bounded (issue 37: a stop that can hang is a restart that cannot happen): whatever
/// is waiting on the node when SIGTERM comes ends with it, and the process exits.
@Suite struct StopProcessTests {
    @Test func aStopEndsWhileARequestWaits() async throws {
        let cluster = try TestCluster("stopwait")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        // A request that waits: a fetch of an attachment nobody announced waits up to 5 s for it
        // to appear, waking every 200 ms. Its wake-ups used to be tasks of a spawner that a stop
        // finishes: the next one was never run, and the request (and the process) waited for ever.
        let client = try await a.client()
        let fetch = Task {
            try await client.ask("attach.get", ["id": .string(String(repeating: "ab", count: 32)), "path": .string("\(cluster.dir)/never"), "wait": true])
        }
        // Time for the request to reach the node (the 5 s it waits dwarf it).
        try await Task.sleep(for: .milliseconds(500))
        a.kill()
        let status = try await a.waitForExit(within: 30)
        #expect(status == 0 && !a.log.contains("exiting anyway"), "a exited with \(status); its log ends: \(a.log.split(separator: "\n").suffix(10).joined(separator: "\n"))")
        // The waiting request ended with the node: an error reply or the connection closed.
        await #expect(throws: (any Error).self) { _ = try await fetch.value }
        await client.close()
    }
}
