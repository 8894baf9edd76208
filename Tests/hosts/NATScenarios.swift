import Foundation
import HuddleTestSupport
import HuddleControl
import Testing

// The NAT lab (issue 36, item 5, its first part): members behind nftables routers that NAT them.
// What it asserts is what is built today: observed addresses, the NAT kind each member reports,
// each member's path, and relaying through a member (item 2). An easy and a hard member cannot
// punch through to each other (item 3 tries only where both NATs are easy): they stay relayed.

private let runNATScenarios = !HostEnvironment.skipRequested && HostEnvironment.usable

@Suite("Several hosts: NAT lab (network namespaces)", .serialized, .timeLimit(.minutes(10)))
struct NATScenarios {
    /// A public member, one behind an `easy` router and one behind a `hard` router, both joining
    /// through the public one: each reports its NAT kind (`none`, `easy`, `hard`) and where members
    /// see its traffic come from; the public member has a direct path to both and they to it, and
    /// the two NATted members have none to each other but through a relay (easy ↔ hard: no punch).
    @Test(.enabled(if: runNATScenarios)) func membersBehindEasyAndHardRoutersLearnTheirNATThroughAPublicMember() async throws {
        let lab = try HostLab("nat", hosts: 3, routers: [.public, .easy, .hard])
        defer { lab.teardown() }
        let pub = try await lab.start(0)
        let watch = try await HostEvents.subscribe(pub, topics: ["members"])
        let easy = try await lab.start(1, join: [0])
        let hard = try await lab.start(2, join: [0])
        let (easyWAN, hardWAN) = (lab.hosts[1].wan ?? "?", lab.hosts[2].wan ?? "?")
        let started = ContinuousClock.now

        func status(_ node: HostNode) async throws -> (nat: String, reflexive: [String]) {
            let s = try await node.request("status")
            return (s["nat"]?.stringValue ?? "", (s["reflexive"]?.arrayValue ?? []).compactMap(\.stringValue))
        }
        do {
            try await eventually("nat none / easy / hard at the public, easy and hard members", within: 60, every: .milliseconds(250)) {
                let (p, e, h) = (try await status(pub).nat, try await status(easy).nat, try await status(hard).nat)
                return p == "none" && e == "easy" && h == "hard"
            }
        } catch {
            var seen: [String] = []
            for node in [pub, easy, hard] { seen.append("\(node.name): \((try? await status(node)).map { "\($0.nat) \($0.reflexive)" } ?? "?")") }
            Issue.record("\(error): \(seen.joined(separator: "; "))\n\(lab.logs)")
            return
        }
        let classifiedSeconds = (ContinuousClock.now - started).seconds
        let (p, e, h) = (try await status(pub), try await status(easy), try await status(hard))
        #expect(p.reflexive == [pub.host.addr], "the public member is seen at its own address: \(p.reflexive)")
        // The easy router keeps the listening port: members see 7400 at the router's address.
        #expect(e.reflexive.first == "\(easyWAN):7400", "easy: \(e.reflexive)")
        // The hard router picks a port per destination: the router's address, another port.
        #expect(h.reflexive.first.map { $0.hasPrefix("\(hardWAN):") && $0 != "\(hardWAN):7400" } == true, "hard: \(h.reflexive)")

        // Paths: the public member reaches both directly and they reach it; the NATted pair has none.
        func paths(_ node: HostNode) async throws -> [String: String] {
            let list = try await node.request("members")["members"]?.arrayValue ?? []
            return Dictionary(list.compactMap(\.objectValue).map { ($0["member"]?.stringValue ?? "", $0["path"]?.stringValue ?? "missing") },
                              uniquingKeysWith: { a, _ in a })
        }
        try await eventually("the public member's paths to both NATted members to be direct", within: 30) {
            let mine = try await paths(pub)
            return mine[easy.member] == "direct" && mine[hard.member] == "direct" && mine[pub.member] == "self"
        }
        let (fromEasy, fromHard) = (try await paths(easy), try await paths(hard))
        #expect(fromEasy[pub.member] == "direct" && fromHard[pub.member] == "direct", "NATted members reach the public one directly")
        #expect(fromEasy[easy.member] == "self" && fromHard[hard.member] == "self")
        // Easy ↔ hard cannot punch (item 3): the NATted pair has no path, or one through the public member (item 2).
        #expect(fromEasy[hard.member].map { $0 == "none" || $0 == "relayed" } ?? true, "easy → hard: \(fromEasy[hard.member] ?? "not listed")")
        #expect(fromHard[easy.member].map { $0 == "none" || $0 == "relayed" } ?? true, "hard → easy: \(fromHard[easy.member] ?? "not listed")")
        var members = try await pub.request("members")["members"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(members.allSatisfy { $0["via"] == .null }, "no member is relayed, so no via")

        // A joiner's path is in its `joined` event (direct already); a path that changes later is a
        // `member` event `path`: the easy member killed, the public member's link to it closes.
        members = try await easy.request("members")["members"]?.arrayValue?.compactMap(\.objectValue) ?? []
        let hardAtEasy = members.first { $0["member"]?.stringValue == hard.member }?["state"]?.stringValue ?? "not listed"
        easy.kill()
        do {
            try await eventually("a member event path none about the killed member at the public one", within: 30) {
                await watch.memberChanges("path", about: easy.member).contains {
                    $0.event["member"]?.objectValue?["path"]?.stringValue == "none"
                }
            }
        } catch {
            Issue.record("\(error): path events \(await watch.memberChanges("path").map(\.event))")
        }
        let afterKill = try await paths(pub)[easy.member]
        #expect(afterKill == nil || afterKill == "none", "the public member's path to the killed member: \(afterKill ?? "")")
        await watch.stop()
        await expectNoOverflows([watch])

        report("NAT lab public+easy+hard: nat none/easy/hard after \(String(format: "%.1f", classifiedSeconds)) s; reflexive public \(p.reflexive), "
            + "easy \(e.reflexive), hard \(h.reflexive); paths public↔NATted direct, easy↔hard \(fromEasy[hard.member] ?? "?") (no punch easy↔hard; "
            + "the easy member lists the hard one as \(hardAtEasy))")
    }
}
