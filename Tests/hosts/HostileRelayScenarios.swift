import Foundation
import HuddleTestSupport
import HuddleControl
import Testing

// A hostile relay (issue 36, item 6) in the NAT lab: two members behind `hard` routers (they can
// only be relayed) and two public members that can relay for them. The first relay turns hostile
// once it has forwarded a given number of bytes (`HUDDLE_TEST_RELAY_CORRUPT_AFTER`, test-only):
// it flips a byte, drops every other message, or stalls (forwards nothing while keeping its
// circuits open). The pair must notice (the link fails its AEAD or framing, or hears nothing: the
// stall rule), move to the other relay and stay off the hostile one, with nothing delivered that
// its origin did not send and everything delivered exactly once.

private let runHostileRelay = !HostEnvironment.skipRequested && HostEnvironment.usable

/// What the hostile relay does, as `HUDDLE_TEST_RELAY_MODE` names it.
enum HostileMode: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case corrupt, drop, stall
    var testDescription: String { rawValue }
}

@Suite("Several hosts: a hostile relay (network namespaces)", .timeLimit(.minutes(6)))
struct HostileRelayScenarios {
    /// Relay r1 (hostile past a threshold) carries the hard pair a–b first; r2 joins after. Once r1
    /// misbehaves, a and b see their link fail or go silent, close the circuit, and link again
    /// through r2 — never through r1 again in the test — while both keep sending. All four alive in
    /// every view; every message exactly once in causal order at all four; the text of every
    /// message a and b exchanged never appears in the circuit bytes either relay forwarded
    /// (`plaintext_seen`: the relays carry the pair's link ciphertext; they hold no key of it — the
    /// link's Noise handshake runs end to end between a and b, its transport keys come from their
    /// ephemeral keys alone, and a relay's code only moves `circuitData` bytes).
    @Test(.enabled(if: runHostileRelay), arguments: HostileMode.allCases)
    func thePairLeavesAHostileRelayForAnotherAndLosesNothing(_ mode: HostileMode) async throws {
        let lab = try HostLab("hr\(mode.rawValue.prefix(2))", hosts: 4, routers: [.public, .public, .hard, .hard])
        defer { lab.teardown() }
        let threshold = 300_000
        let marker = "pair-secret-\(mode.rawValue)-7f3a"
        let scan = ["HUDDLE_TEST_RELAY_SCAN": marker]
        let r1 = try await lab.start(0, environment: scan.merging(["HUDDLE_TEST_RELAY_CORRUPT_AFTER": "\(threshold)",
                                                                   "HUDDLE_TEST_RELAY_MODE": mode.rawValue]) { _, new in new })
        let a = try await lab.start(2, join: [0])
        let b = try await lab.start(3, join: [0])

        /// The relay both ends of the pair are linked through, when they agree.
        func pairVia() async throws -> String? {
            guard let ab = try await member(a, b), let ba = try await member(b, a),
                  ab["path"]?.stringValue == "relayed", ba["path"]?.stringValue == "relayed",
                  ab["state"]?.stringValue == "alive", ba["state"]?.stringValue == "alive",
                  let via = ab["via"]?.stringValue, ba["via"]?.stringValue == via else { return nil }
            return via
        }
        func relayStats(_ node: HostNode) async throws -> JSONObject { try await node.request("stats")["relay"]?.objectValue ?? [:] }

        do {
            try await eventually("the hard pair relayed via r1 (the only relay yet)", within: 60, every: .milliseconds(200)) {
                try await pairVia() == r1.member
            }
        } catch {
            Issue.record("\(error): a sees b \(String(describing: try? await member(a, b)))\n\(lab.logs)")
            return
        }
        let before = try await relayStats(r1)["forwarded_bytes"]?.intValue ?? -1
        guard before < Int64(threshold) else {
            Issue.record("r1 forwarded \(before) bytes before r2 joined: past the threshold \(threshold), the test proves nothing")
            return
        }
        let r2 = try await lab.start(1, join: [0], environment: scan)
        let nodes = [r1, r2, a, b]
        var streams: [HostEvents] = []
        // From each node's first event, so that no path event comes before the subscription.
        for node in nodes { streams.append(try await HostEvents.subscribe(node, topics: ["members", "messages"], since: 0)) }
        try await lab.waitForOneView(nodes)

        // a and b send all along (each message carries the marker), r1 and r2 now and then, until
        // the pair is relayed via r2 and 20 rounds past it.
        let filler = String(repeating: "x", count: 1500)
        var sent: Set<String> = []
        var clients: [ControlClient] = []
        for node in nodes { clients.append(try await node.client()) }
        let started = ContinuousClock.now
        var round = 0, roundsMoved = 0
        while roundsMoved < 20 {
            guard ContinuousClock.now - started < .seconds(120) else { break }
            round += 1
            for (i, node) in nodes.enumerated() where i >= 2 || round % 10 == 0 {
                let text = "\(node.name)-\(round)-\(marker)-\(filler)"
                _ = try await clients[i].ask("send", ["text": .string(text)])
                sent.insert(text)
            }
            if try await pairVia() == r2.member { roundsMoved += 1 }
            try await Task.sleep(for: .milliseconds(50))
        }
        for client in clients { await client.close() }
        let movedSeconds = (ContinuousClock.now - started).seconds
        let r1Stats = try await relayStats(r1)
        guard roundsMoved >= 20 else {
            let (via, seen) = (try? await pairVia(), try? await member(a, b))
            let why = "\(mode): the pair did not move to r2 within 120 s: via \(String(describing: via)), r1 \(r1Stats), "
                + "a sees b \(String(describing: seen))\n\(lab.logs)"
            Issue.record(Comment(rawValue: why))
            return
        }
        #expect((r1Stats["tampered"]?.intValue ?? 0) >= 1, "r1 misbehaved: \(r1Stats)")

        // How the ends noticed: a bad frame (AEAD, framing) or a silent link (the stall rule).
        var dropped: Int64 = 0, stalled: Int64 = 0
        for node in [a, b] {
            dropped += try await node.request("stats")["dropped_frames"]?.intValue ?? 0
            stalled += try await relayStats(node)["stalled"]?.intValue ?? 0
        }
        switch mode {
        case .stall: #expect(stalled >= 1, "a stalled relayed link was found (stall rule): stalled \(stalled)")
        case .corrupt, .drop: #expect(dropped + stalled >= 1, "the pair refused bad frames or found its link silent: \(dropped) / \(stalled)")
        }

        // Once on r2, never back on r1: every path event at a about b after the first via r2.
        let events = await streams[2].memberChanges("path", about: b.member).compactMap { $0.event["member"]?.objectValue }
        let hops = events.map { "\($0["path"]?.stringValue ?? "?")\($0["via"]?.stringValue.map { $0 == r1.member ? "/r1" : $0 == r2.member ? "/r2" : "/?" } ?? "")" }
        if let first = hops.firstIndex(of: "relayed/r2") {
            #expect(!hops[first...].contains("relayed/r1"), "\(mode): the pair went back to the hostile relay: \(hops)")
        } else {
            Issue.record("\(mode): no path event relayed via r2 at a about b: \(hops)")
        }

        let total = sent.count
        let problems = try await everyMessageOnce(streams, sent: sent, within: 90)
        guard problems.isEmpty else {
            Issue.record("\(mode): \(problems.prefix(10))\n\(lab.logs)")
            return
        }
        try await lab.waitForOneView(nodes)
        #expect(try await pairVia() == r2.member, "\(mode): the pair is still relayed via r2")
        let r2Stats = try await relayStats(r2)
        #expect((r2Stats["forwarded_bytes"]?.intValue ?? 0) > 0, "r2 relays the pair now: \(r2Stats)")
        for (name, stats) in [("r1", r1Stats), ("r2", r2Stats)] {
            #expect(stats["plaintext_seen"]?.intValue == 0, "\(name) saw the pair's plaintext in what it forwarded: \(stats)")
        }
        for stream in streams { await stream.stop() }
        await expectNoOverflows(streams)
        report("NAT lab hostile relay (\(mode)): the hard pair left r1 for r2 \(String(format: "%.1f", movedSeconds)) s after r2 joined "
            + "(path events at a about b \(hops); bad frames \(dropped), stalls \(stalled)); \(total) messages exactly once at 4 members; "
            + "r1 tampered with \(r1Stats["tampered"]?.intValue ?? 0) messages; marker seen in relayed bytes 0 times at r1 and r2")
    }
}
