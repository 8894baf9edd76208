import Foundation
import HuddleTestSupport
import HuddleControl
import Testing

// Relaying through a member (issue 36, item 2) in the NAT lab: two members behind `hard` NAT
// routers (a new port per destination, nothing taken inbound) cannot link to each other; they link
// through the public member, end to end.

private let runRelayScenarios = !HostEnvironment.skipRequested && HostEnvironment.usable

@Suite("Several hosts: relay through a member (network namespaces)", .serialized, .timeLimit(.minutes(10)))
struct RelayScenarios {
    /// One public member and two behind `hard` routers: all three alive in every view, the hard
    /// pair's path `relayed` via the public member both ways, every message between them exactly
    /// once in causal order. The public member flips one byte of what it relays once
    /// (`HUDDLE_TEST_RELAY_CORRUPT_AFTER`, a hostile relay's move): the pair's link fails (its AEAD
    /// or framing: the relay holds no key of it, so it cannot make a valid record) and forms again
    /// through the relay, and nothing is delivered that its origin did not send.
    @Test(.enabled(if: runRelayScenarios)) func twoMembersBehindHardNATsLinkThroughThePublicOneEndToEnd() async throws {
        let lab = try HostLab("relay", hosts: 3, routers: [.public, .hard, .hard])
        defer { lab.teardown() }
        let corruptAfter = 150_000
        let pub = try await lab.start(0, environment: ["HUDDLE_TEST_RELAY_CORRUPT_AFTER": "\(corruptAfter)"])
        let a = try await lab.start(1, join: [0])
        let b = try await lab.start(2, join: [0])
        let nodes = [pub, a, b]
        var streams: [HostEvents] = []
        // From each node's first event: under load the pair can be relayed before this subscription,
        // and the check below needs its first `relayed` path event (a full-suite run missed it).
        for node in nodes { streams.append(try await HostEvents.subscribe(node, topics: ["members", "messages"], since: 0)) }
        let started = ContinuousClock.now

        do {
            try await eventually("the hard pair relayed via the public member both ways", within: 60, every: .milliseconds(250)) {
                let ab = try await isRelayed(a, b, via: pub)
                let ba = try await isRelayed(b, a, via: pub)
                return ab && ba
            }
        } catch {
            Issue.record("\(error): a sees b \(String(describing: try? await member(a, b))), b sees a \(String(describing: try? await member(b, a)))\n\(lab.logs)")
            return
        }
        let relayedSeconds = (ContinuousClock.now - started).seconds
        try await lab.waitForOneView(nodes)
        let (pubA, pubB) = (try await member(pub, a)?["path"]?.stringValue, try await member(pub, b)?["path"]?.stringValue)
        #expect(pubA == "direct" && pubB == "direct", "the public member links to both directly: \(pubA ?? "-") \(pubB ?? "-")")

        // Messages both ways and from the public member, before and after the relay corrupts a byte.
        let filler = String(repeating: "x", count: 1500)
        var sent: Set<String> = []
        func send(_ round: Int, count: Int) async throws {
            for node in nodes {
                let client = try await node.client()
                for i in 0..<count {
                    let text = "\(node.name)-\(round)-\(i)-\(filler)"
                    _ = try await client.ask("send", ["text": .string(text)])
                    sent.insert(text)
                }
                await client.close()
            }
        }
        try await send(1, count: 60)
        // The relay has now forwarded more than the threshold: one byte of it was flipped.
        do {
            try await eventually("the public member to have flipped one relayed byte", within: 60, every: .milliseconds(250)) {
                try await pub.request("stats")["relay"]?.objectValue?["corrupted"]?.intValue == 1
            }
        } catch {
            Issue.record("\(error): relay stats \(String(describing: try? await pub.request("stats")["relay"]))\n\(lab.logs)")
            return
        }
        // The pair's link failed and formed again through the relay (a path event away from
        // relayed, then back), and the relay held no key with which it could have made it pass.
        do {
            try await eventually("the pair's link to fail and form again through the relay", within: 60, every: .milliseconds(250)) {
                let changes = await streams[1].memberChanges("path", about: b.member).compactMap { $0.event["member"]?.objectValue?["path"]?.stringValue }
                guard let dropped = changes.lastIndex(where: { $0 != "relayed" }), changes.firstIndex(of: "relayed").map({ $0 < dropped }) == true else { return false }
                guard changes[dropped...].contains("relayed") else { return false }
                let ab = try await isRelayed(a, b, via: pub)
                let ba = try await isRelayed(b, a, via: pub)
                return ab && ba
            }
        } catch {
            Issue.record("\(error): a's path events about b \(await streams[1].memberChanges("path", about: b.member).map(\.event))\n\(lab.logs)")
            return
        }
        var failures = 0
        for node in [a, b] {
            let stats = try await node.request("stats")
            failures += Int(stats["dropped_frames"]?.intValue ?? 0)
        }
        #expect(failures >= 1, "one end refused the corrupted bytes as a bad frame (its AEAD failed)")
        try await send(2, count: 20)

        let total = sent.count
        let problems = try await everyMessageOnce(streams, sent: sent, within: 90)
        guard problems.isEmpty else {
            Issue.record("\(problems.prefix(10))\n\(lab.logs)")
            return
        }
        try await lab.waitForOneView(nodes)
        let relay = try await pub.request("stats")["relay"]?.objectValue ?? [:]
        #expect((relay["forwarded_bytes"]?.intValue ?? 0) > Int64(corruptAfter))
        for stream in streams { await stream.stop() }
        await expectNoOverflows(streams)
        report("NAT lab relay: hard↔hard relayed via the public member after \(String(format: "%.1f", relayedSeconds)) s; "
            + "\(total) messages exactly once at 3 members across one corrupted relayed byte (link re-formed); relay forwarded "
            + "\(relay["forwarded_bytes"]?.intValue ?? 0) bytes")
    }
}
