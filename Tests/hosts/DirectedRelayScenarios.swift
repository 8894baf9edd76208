import Foundation
import HuddleTestSupport
import HuddleControl
import Testing

// Directed messages over a relayed link (issue 36, the reach benchmark's lost directed messages):
// two members behind `hard` routers linked through the public member, one sending reliable
// messages `to` the other faster than the relay's budget (`--relay-limit`), while the relay
// breaks the pair's link once (it flips one relayed byte: the link fails its AEAD and forms again
// through the relay). Directed messages are reliable (CONTROL.md `send` with `to`): every one the
// sender accepted must arrive exactly once, in order, across the break; and a circuit over its
// budget slows its sender instead of being closed.

private let runDirectedRelay = !HostEnvironment.skipRequested && HostEnvironment.usable

@Suite("Several hosts: directed messages over a relayed link (network namespaces)", .serialized, .timeLimit(.minutes(8)))
struct DirectedRelayScenarios {
    @Test(.enabled(if: runDirectedRelay)) func directedMessagesFasterThanTheRelayBudgetArriveOnceInOrderAcrossARelink() async throws {
        let lab = try HostLab("drel", hosts: 3, routers: [.public, .hard, .hard])
        defer { lab.teardown() }
        let limit = 2 << 20
        let corruptAfter = 6 << 20
        let pub = try await lab.start(0, environment: ["HUDDLE_TEST_RELAY_CORRUPT_AFTER": "\(corruptAfter)"], arguments: ["--relay-limit", "\(limit)"])
        let a = try await lab.start(1, join: [0])
        let b = try await lab.start(2, join: [0])

        do {
            try await eventually("the hard pair relayed via the public member both ways", within: 60, every: .milliseconds(250)) {
                let ab = try await isRelayed(a, b, via: pub)
                let ba = try await isRelayed(b, a, via: pub)
                return ab && ba
            }
        } catch {
            Issue.record("\(error)\n\(lab.logs)")
            return
        }
        let stream = try await HostEvents.subscribe(b, topics: ["messages"])

        // 1,280 messages of 16 KiB (20 MiB) from a to b alone, as fast as a takes them: ten times
        // the relay's budget per second. A send answered `busy` was not accepted: tried again.
        let count = 1280
        let filler = String(repeating: "d", count: 16 * 1024)
        let sender = try await a.client()
        var accepted = 0, busy = 0
        let started = ContinuousClock.now
        for i in 0..<count {
            while true {
                do {
                    _ = try await sender.ask("send", ["text": .string("directed-\(i)-\(filler)"), "to": .array([.string(b.member)])])
                    accepted += 1
                    break
                } catch {
                    guard (error as? ControlError)?.code == .busy else { throw error }
                    busy += 1
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
        }
        await sender.close()
        let sendSeconds = (ContinuousClock.now - started).seconds

        func arrived() async -> [Int] {
            await stream.messages().compactMap { event -> Int? in
                guard event["from"]?.stringValue == a.member, let text = event["text"]?.stringValue, text.hasPrefix("directed-") else { return nil }
                return Int(text.dropFirst("directed-".count).prefix { $0 != "-" })
            }
        }
        do {
            try await eventually("all \(count) directed messages at b", within: 180, every: .milliseconds(250)) { await arrived().count >= count }
        } catch {
            let got = await arrived()
            let relay = try? await pub.request("stats")["relay"]
            Issue.record("\(error): b has \(got.count) of \(count) (last \(got.last ?? -1)); sent in \(String(format: "%.1f", sendSeconds)) s, busy \(busy); relay \(String(describing: relay))\n\(lab.logs)")
            return
        }
        try await Task.sleep(for: .seconds(1))  // a duplicate would come right behind
        try await stream.catchUp()
        let got = await arrived()
        #expect(got == Array(0..<count), "each directed message exactly once, in the order sent: \(got.count) arrived, first out of place at \(String(describing: zip(got, 0..<count).first { $0.0 != $0.1 }))")
        let relay = try await pub.request("stats")["relay"]?.objectValue ?? [:]
        #expect(relay["corrupted"]?.intValue == 1, "the relay broke the pair's link once: \(relay)")
        let refused = relay["refused"]?.objectValue ?? [:]
        #expect((refused["over_budget"]?.intValue ?? 0) == 0 && (refused["queue_full"]?.intValue ?? 0) == 0,
                "a circuit over its budget slows its sender instead of being closed: \(refused)")
        await stream.stop()
        report("NAT lab directed relay: \(count) directed 16 KiB messages hard → hard through a relay limited to \(limit >> 20) MiB/s, "
            + "accepted in \(String(format: "%.1f", sendSeconds)) s (\(busy) busy answers), all exactly once in order across one broken relayed link")
    }
}
