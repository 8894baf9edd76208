import Foundation
import HuddleControl
import HuddleTestSupport
import Testing

/// A stop is bounded whatever the peers do (issue 37: a stop that can hang is a restart that
/// cannot happen): a node whose links no peer reads any more still exits promptly on SIGTERM,
/// with its state committed, rather than waiting for ever on writes that cannot complete.
@Suite struct StopProcessTests {
    @Test func aStopEndsWhenNoPeerReadsItsLinks() async throws {
        let cluster = try TestCluster("stopstall")
        var relays: [StallableRelay] = []
        defer {
            for relay in relays { relay.close() }
            cluster.shutdown()
        }
        let (_, _, c) = try await startTrioBehindRelays(cluster, relays: &relays)
        // Every link of c's stalls at the relays, both ways: nothing c writes is read any more.
        try await stallLinks(of: c, relays: relays)
        // More than the sockets on the way hold (loopback send and receive buffers of a few MiB
        // each), less than what c keeps for members that have not acknowledged (16 MiB): c's
        // writers are blocked on full sockets with bytes still queued for each link.
        let client = try await c.client()
        let text = String(repeating: "s", count: 48 * 1024)
        for i in 0..<270 {
            let reply = try await client.request("send", ["text": .string("\(i) \(text)")])
            #expect(reply["msg"]?.stringValue != nil, "send \(i) was not accepted: \(reply)")
        }
        await client.close()
        c.kill()
        let status = try await c.waitForExit(within: 30)
        #expect(status == 0, "c exited with \(status); its log ends: \(c.log.split(separator: "\n").suffix(10).joined(separator: "\n"))")
        #expect(!c.log.contains("exiting anyway"), "a task outlived the stop")
        #expect(c.log.contains("stopped"))
    }
}
