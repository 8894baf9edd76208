import Foundation
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import Testing

@Suite(.timeLimit(.minutes(10)))
struct ForgedMessageTests {
    @Test func aMessageNotSignedByItsClaimedOriginIsDroppedAndCounted() async throws {
        let cluster = try TestCluster("forged")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let events = try await EventCollector.subscribe(a, topics: ["messages"])
        guard let victim = MemberID(b.member) else { Issue.record("bad member id"); return }
        let mallory = Identity.generate()
        let info = MemberInfo(id: MemberID(raw: 0xBAD), node: mallory.publicKey, name: "mallory", addr: "127.0.0.1:9")
        let link = try AdversaryLink(addr: a.addr, key: try SessionKey.load(from: cluster.key), identity: mallory, info: info)
        defer { link.close() }
        // Signed by mallory, claiming to be b's next broadcast and a directed message from b.
        let lie = WireMessage(origin: victim, counter: 999, seq: 1, to: nil, body: Array("transfer all funds".utf8))
        let directed = WireMessage(origin: victim, counter: 1000, seq: 0, to: [MemberID(a.member) ?? victim], body: Array("psst".utf8))
        let flush = MessageBatch.sign([lie, directed], identity: mallory)
        for signed in flush { try link.write(.message(signed)) }
        // And the same lies as a whole batch, the way an origin sends its flushes.
        if let batch = SignedBatch(of: flush, for: MemberID(a.member) ?? victim) { try link.write(.batch(batch)) }
        try await eventually("a to count the forged messages, alone and batched") {
            (try await a.request("stats")["messages_forged"]?.intValue ?? 0) >= 4
        }
        // b's real message still arrives, and nothing forged was delivered.
        _ = try await b.request("send", ["text": "the real one"])
        try await eventually("b's real message") { await events.messages().contains { $0["text"]?.stringValue == "the real one" } }
        let texts = await events.messages().compactMap { $0["text"]?.stringValue }
        #expect(!texts.contains("transfer all funds") && !texts.contains("psst"))
        #expect(await events.messages().first { $0["text"]?.stringValue == "the real one" }?["seq"] == .int(1))
        await events.stop()
    }
}
