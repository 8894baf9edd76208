import Foundation
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import Testing

/// Issue 36, item 3, against a real node: hole punching's steps are hostile input like any link
/// message. A member that floods a node with `punch` steps over a direct link (a pair punches only
/// over its relayed link) gets no answer and makes the node dial nothing, not even the address its
/// own signed record offers; every step is refused and counted in `stats.relay.punch.refused`.
@Test func aFloodOfPunchStepsOverADirectLinkIsRefusedCountedAndNeverDialed() async throws {
    let cluster = try TestCluster("punch-flood")
    defer { cluster.shutdown() }
    let a = try await cluster.start("a")
    let identity = Identity.generate(), id = MemberID(raw: UInt64.random(in: 1...(1 << 52)))
    let info = MemberInfo(id: id, node: identity.publicKey, name: "mallory", addr: "127.0.0.1:9", reach: ["127.0.0.1:9"]).signed(by: identity)
    let link = try AdversaryLink(addr: a.addr, key: try SessionKey.load(from: cluster.key), identity: identity, info: info)
    defer { link.close() }
    try link.write(.pushPull(SWIMPushPull(join: false, members: [info])))
    try await eventually("a to know mallory") {
        (try await a.request("members")["members"]?.arrayValue ?? []).contains { $0.objectValue?["member"]?.stringValue == id.description }
    }
    func punch() async throws -> JSONObject { try await a.request("stats")["relay"]?.objectValue?["punch"]?.objectValue ?? [:] }
    let steps = HolePunch.Step.allCases
    for i in 1...600 { try link.write(.punch(attempt: UInt32(i), step: steps[i % steps.count])) }
    try await eventually("a to refuse all 600 punch steps", within: 30) { try await punch()["refused"]?.intValue == 600 }
    let counted = try await punch()
    #expect(counted["attempts"]?.intValue == 0 && counted["successes"]?.intValue == 0, "a dialed nobody: \(counted)")
    #expect(a.process.isRunning)
}
