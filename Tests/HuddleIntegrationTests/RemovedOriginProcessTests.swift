import Foundation
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import HuddleTestSupport
import Testing

/// Issue 33: "a removed member's new messages are still delivered when a lagging member relays
/// them". Mallory, a hostile member speaking the protocol with our own codec (`AdversaryLink`),
/// broadcasts three messages to a and b (c repairs them), and a removes her. Her puppet — a second
/// node key she runs as a member, on the removal's roster — links to every node with the epoch-0
/// key (let in behind, as a lagging member) and relays more broadcasts signed by Mallory's node key.
/// Every node delivers exactly her first three (clock 3 everywhere) and refuses the later ones,
/// counted in `stats.refused.after_removal`. Before: each relayed broadcast was delivered
/// (clock 5 at every node).
@Suite(.timeLimit(.minutes(10)))
struct RemovedOriginProcessTests {
    private func hostileRecord(_ identity: Identity, _ name: String) -> MemberInfo {
        MemberInfo(id: MemberID(raw: UInt64.random(in: 1...(1 << 52))), node: identity.publicKey, name: name, addr: "127.0.0.1:9").signed(by: identity)
    }

    /// Mallory's broadcasts `seqs`, signed by her node key, one link message each.
    private func broadcasts(_ seqs: ClosedRange<UInt64>, by identity: Identity, _ info: MemberInfo) -> [LinkMessage] {
        seqs.map { seq in
            let message = WireMessage(origin: info.id, counter: seq, seq: seq, to: nil, body: Array("mallory \(seq)".utf8))
            return MessageBatch.sign([message], identity: identity).map(LinkMessage.message)[0]
        }
    }

    private func clock(_ node: TestNode, of member: MemberID) async throws -> Int64? {
        try await node.request("status")["clock"]?.objectValue?[member.description]?.intValue
    }

    @Test func aRemovedMembersBroadcastsAfterItsCutoffAreRefusedEverywhere() async throws {
        let cluster = try TestCluster("cutoff")
        defer { cluster.shutdown() }
        var nodes: [TestNode] = []
        for name in ["a", "b", "c"] { nodes.append(try await startOwnKey(cluster, name)) }
        try await cluster.waitForFullMesh(3)
        let key = try SessionKey.load(from: cluster.key)
        let mallory = Identity.generate(), puppet = Identity.generate()
        let (malloryInfo, puppetInfo) = (hostileRecord(mallory, "mallory"), hostileRecord(puppet, "puppet"))
        var links: [AdversaryLink] = []
        defer { for link in links { link.close() } }
        for node in nodes {
            let link = try AdversaryLink(addr: node.addr, key: key, identity: mallory, info: malloryInfo)
            try link.write(.pushPull(SWIMPushPull(join: false, members: [malloryInfo, puppetInfo])))
            try link.write(.hello(since: 0, nonApplication: 0))
            links.append(link)
        }
        for node in nodes {
            try await eventually("\(node.name) to know mallory and her puppet") {
                let names = (try await node.request("members")["members"]?.arrayValue ?? []).compactMap { $0.objectValue?["name"]?.stringValue }
                return names.contains("mallory") && names.contains("puppet")
            }
        }
        // Her first three broadcasts reach a and b; c repairs them.
        let sent = broadcasts(1...5, by: mallory, malloryInfo)
        for link in links.prefix(2) { for message in sent.prefix(3) { try link.write(message) } }
        for node in nodes { try await eventually("\(node.name) to deliver mallory's first three") { try await clock(node, of: malloryInfo.id) == 3 } }

        _ = try await nodes[0].request("remove", ["member": .string(hexString(mallory.publicKey))], within: 90)
        for node in nodes { try await eventually("\(node.name) on epoch 1") { try await epoch(node) == 1 } }

        // The puppet, a lagging member with the epoch-0 key, relays her next two.
        for node in nodes {
            let link = try AdversaryLink(addr: node.addr, key: key, identity: puppet, info: puppetInfo)
            links.append(link)
            for message in sent.suffix(2) { try link.write(message) }
        }
        for node in nodes {
            try await eventually("\(node.name) to refuse mallory's broadcasts after her removal") {
                field(try await node.request("stats"), "refused", Refusal.afterRemoval.rawValue) >= 2
            }
            let seen = try await clock(node, of: malloryInfo.id)
            #expect(seen == 3, "\(node.name) delivered mallory's broadcasts through \(seen.map(String.init) ?? "none")")
        }
    }
}
