import Foundation
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import Testing

/// Issue 20, item 3: datagrams authenticate their sender and bind their recipient. An attacker
/// holding the session key — with a link of its own to the node, as any key holder can get — sends
/// datagrams claiming to be member b: under the session key (a suspicion and a `left` of b, an ack,
/// an unreliable message, a ping whose counter would push b's replay window out of reach), and
/// under its own link's key with b's id in the header or in the payload. None is taken as b's: b
/// stays alive at its incarnation, the message is never delivered, b's own datagrams still arrive,
/// and every attempt is counted — `unauthenticated_datagram` in `stats.refused`, or a datagram
/// that did not open in `dropped_datagrams`. A counter far ahead on the attacker's own key is
/// refused as `counter_jump`.
@Suite(.timeLimit(.minutes(10)))
struct SpoofedDatagramProcessTests {
    @Test func aKeyHolderCannotMakeANodeTakeADatagramAsAnotherMembers() async throws {
        // b suspected or failed, or moved off its incarnation, may be load's doing: retried.
        try await withoutSuspicionByLoad("b suspected at a") { _ in try await spoofedDatagramsClaimingB() }
    }

    /// One run of the attack; returns what may be load's doing (b suspected, failed or refuted at a).
    private func spoofedDatagramsClaimingB() async throws -> [String] {
        let cluster = try TestCluster("spoofdg")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        guard let aID = MemberID(a.member), let bID = MemberID(b.member) else { Issue.record("bad member ids"); return [] }
        let events = try await EventCollector.subscribe(a, topics: ["messages", "members"])
        let key = try SessionKey.load(from: cluster.key)
        func bAtA() async throws -> JSONObject? {
            try await a.request("members")["members"]?.arrayValue?.compactMap(\.objectValue).first { $0["member"]?.stringValue == b.member }
        }
        let before = try await bAtA()
        #expect(before?["state"]?.stringValue == "alive")
        func refused(_ reason: Refusal) async throws -> Int64 {
            try await a.request("stats")["refused"]?.objectValue?[reason.rawValue]?.intValue ?? -1
        }
        let refusedBefore = try await refused(.unauthenticatedDatagram)
        let jumpsBefore = try await refused(.counterJump)
        let droppedBefore = try await a.request("stats")["dropped_datagrams"]?.intValue ?? 0
        #expect(refusedBefore >= 0 && jumpsBefore >= 0, "stats.refused lists every reason")

        // Mallory: a key holder with a link of its own to a.
        let mallory = AdversaryLink.mallory
        let link = try await AdversaryLink.admitted(by: a, key: key, links: 2)
        defer { link.close() }

        func asB(_ counter: UInt64, _ kind: SWIMMessage.Kind, _ gossip: [SWIMGossip] = []) -> DatagramPayload {
            DatagramPayload(sender: bID, counter: counter, content: .swim(SWIMMessage(sender: bID, kind: kind, gossip: gossip)))
        }
        let spoofedMessage = WireMessage(origin: bID, counter: 1, seq: 0, to: nil, body: Array("spoofed".utf8))
        let underSessionKey = [
            asB(1, .gossip, [.suspect(bID, incarnation: 0, from: aID)]),
            asB(2, .gossip, [.left(bID, incarnation: 1)]),
            asB(3, .ack(seq: 1)),
            DatagramPayload(sender: bID, counter: 4, content: .message(spoofedMessage)),
            asB(WireReader.maximumCount, .ping(seq: 9, target: aID)),
        ]
        let seal = DatagramSeal(key: key.subkey(.datagram))
        try sendUDP(underSessionKey.map { seal.seal($0.encoded()) }, to: a.addr)
        // Under mallory's own link key: b's id in the payload, then in the header.
        let onLink = sealedOnLink([DatagramPayload(sender: bID, counter: 1, content: .message(spoofedMessage))], link: link, from: mallory, to: aID)
            + sealedOnLink([asB(2, .gossip, [.left(bID, incarnation: 1)])], link: link, from: bID, to: aID)
        try sendUDP(onLink, to: a.addr)
        // Mallory's own key, its counter far ahead.
        let own = [1, 2 + ReplayWindow.maximumJump].map {
            DatagramPayload(sender: mallory, counter: $0, content: .swim(SWIMMessage(sender: mallory, kind: .gossip)))
        }
        try sendUDP(sealedOnLink(own, link: link, from: mallory, to: aID), to: a.addr)

        try await eventually("a to count every datagram that claimed b") {
            let dropped = try await a.request("stats")["dropped_datagrams"]?.intValue ?? 0
            return try await refused(.unauthenticatedDatagram) >= refusedBefore + Int64(underSessionKey.count)
                && dropped >= droppedBefore + Int64(onLink.count)
        }
        try await eventually("a to refuse mallory's counter jump") { try await refused(.counterJump) == jumpsBefore + 1 }

        // b's own datagrams still reach a (its window was not pushed), and b is as it was.
        _ = try await b.request("send", ["text": "really b", "reliable": false])
        try await eventually("b's own unreliable message to reach a") {
            await events.messages().contains { $0["text"]?.stringValue == "really b" && $0["from"]?.stringValue == b.member }
        }
        let after = try await bAtA()
        try await events.catchUp()
        var findings: [String] = []
        if !(after?["state"]?.stringValue == "alive" && after?["incarnation"] == before?["incarnation"]) { findings.append("b at a: \(String(describing: after))") }
        #expect(await !events.messages().contains { $0["text"]?.stringValue == "spoofed" }, "a delivered the spoofed message")
        // Nobody leaves: a `left` of b is the spoofed one, whatever the load.
        #expect(await events.memberChanges("left").allSatisfy { $0["member"]?.objectValue?["member"]?.stringValue != b.member }, "a saw b left")
        for change in ["suspect", "failed"] where await !events.memberChanges(change).allSatisfy({ $0["member"]?.objectValue?["member"]?.stringValue != b.member }) {
            findings.append("a saw b \(change)")
        }
        #expect(a.process.isRunning && b.process.isRunning, "a node exited: \(cluster.logs)")
        await events.stop()
        return findings
    }
}
