import Foundation
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import Testing

/// Issue 20, item 1: a member holding the session key sends sealed datagrams whose counts are
/// extreme. `suspect(<the receiver>, incarnation: UInt64.max)` used to trap the receiver (its
/// refutation computed `incarnation + 1`), and the same value in an `alive` trapped it when it
/// wrote the member event. Now every count above 2^53 − 1 is refused by the decoder (a dropped
/// datagram, counted) — a suspicion above 2^53 − 2 — and a suspicion at that bound is refused as a
/// claim above the member's own incarnation: the node stays up and in the session, seen alive by the others.
/// The attacker holds a link to the node (a key holder can), so its datagrams carry its full
/// authority (issue 20, item 3: under the session key alone, gossip is refused outright).
@Suite struct ExtremeCountProcessTests {
    @Test func sealedDatagramsWithExtremeCountsNeitherCrashNorMisleadANode() async throws {
        let cluster = try TestCluster("extreme")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        guard let aID = MemberID(a.member), let bID = MemberID(b.member) else { Issue.record("bad member ids"); return }
        let key = try SessionKey.load(from: cluster.key)
        let mallory = AdversaryLink.mallory
        let link = try await AdversaryLink.admitted(by: a, key: key, links: 2)
        defer { link.close() }
        func sendSealed(_ payloads: [DatagramPayload], to addr: String) throws {
            try sendUDP(sealedOnLink(payloads, link: link, from: mallory, to: aID), to: addr)
        }
        let before = try await a.request("stats")["dropped_datagrams"]?.intValue ?? 0
        let top = WireReader.maximumCount
        func gossip(_ counter: UInt64, _ update: SWIMGossip) -> DatagramPayload {
            DatagramPayload(sender: mallory, counter: counter, content: .swim(SWIMMessage(sender: mallory, kind: .gossip, gossip: [update])))
        }
        let fakeB = MemberInfo(id: bID, node: [UInt8](repeating: 7, count: 32), name: "b", addr: "127.0.0.1:9", incarnation: .max)
        let refused = [
            gossip(1, .suspect(aID, incarnation: .max, from: mallory)),
            gossip(2, .alive(fakeB)),
            gossip(3, .failed(bID, incarnation: .max, from: mallory)),
            gossip(4, .left(bID, incarnation: top + 1)),
            gossip(8, .suspect(aID, incarnation: top, from: mallory)),
            gossip(.max, .suspect(bID, incarnation: 1, from: mallory)),
            DatagramPayload(sender: mallory, counter: 6, content: .message(WireMessage(origin: mallory, counter: .max, seq: 0, to: nil, body: [1]))),
        ]
        try sendSealed(refused, to: a.addr)
        try await eventually("a to count the refused datagrams") {
            (try await a.request("stats")["dropped_datagrams"]?.intValue ?? 0) >= before + Int64(refused.count)
        }
        // The highest suspicion the decoder allows (`madeCountLimit`) is decoded, and refused: only a raises its own
        // incarnation, so a claim far above it names a record that never was (it is not refuted,
        // which would let anyone burn a member's incarnations).
        let refusedBefore = try await a.request("stats")["refused"]?.objectValue?["claim_above_incarnation"]?.intValue ?? 0
        try sendSealed([gossip(7, .suspect(aID, incarnation: WireReader.madeCountLimit, from: mallory))], to: a.addr)
        try await eventually("a to refuse the claim above its incarnation") {
            (try await a.request("stats")["refused"]?.objectValue?["claim_above_incarnation"]?.intValue ?? 0) > refusedBefore
        }
        let record = try await b.request("members")["members"]?.arrayValue?.compactMap(\.objectValue).first { $0["member"]?.stringValue == a.member }
        #expect((record?["incarnation"]?.intValue ?? .max) < 1000, "a did not refute a forged claim")
        // Both nodes are up, see each other alive (a probe may time out on a loaded machine, so
        // this waits), and b's record was not replaced.
        for (node, other) in [(a, b), (b, a)] {
            try await eventually("\(node.name) to see \(other.name) alive") {
                let members = try await node.request("members")["members"]?.arrayValue?.compactMap(\.objectValue) ?? []
                return members.first { $0["member"]?.stringValue == other.member }?["state"]?.stringValue == "alive"
            }
            let members = try await node.request("members")["members"]?.arrayValue?.compactMap(\.objectValue) ?? []
            #expect(members.first { $0["member"]?.stringValue == other.member }?["node"]?.stringValue != hexString(fakeB.node))
        }
        #expect(a.process.isRunning && b.process.isRunning, "a node exited: \(cluster.logs)")
    }
}
