import Foundation
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import HuddleTestSupport
import Testing

/// Issue 33: a hostile member that holds the key attacks the epoch history of real nodes, speaking
/// the protocol with our own codec (`AdversaryLink`): Mallory, and a puppet — a second node key she
/// runs as a member, on the rosters like any other.
@Suite(.timeLimit(.minutes(10)))
struct EpochAttackProcessTests {
    /// A hostile record, signed by its own node key, under a random member id.
    private func hostileRecord(_ identity: Identity, _ name: String) -> MemberInfo {
        MemberInfo(id: MemberID(raw: UInt64.random(in: 1...(1 << 52))), node: identity.publicKey, name: name, addr: "127.0.0.1:9").signed(by: identity)
    }

    /// Links `identity` to every node in `nodes` with `key` and tells each of `records` (push-pull).
    private func hostileLinks(_ nodes: [TestNode], key: SessionKey, _ identity: Identity, _ info: MemberInfo, records: [MemberInfo]) throws -> [AdversaryLink] {
        try nodes.map { node in
            let link = try AdversaryLink(addr: node.addr, key: key, identity: identity, info: info)
            try link.write(.pushPull(SWIMPushPull(join: false, members: records)))
            return link
        }
    }

    /// A change signed by `identity` on top of `key`'s epoch with `roster`, and a fresh random key.
    private func hostileChange(on key: SessionKey, by identity: Identity, _ info: MemberInfo, roster: [[UInt8]],
                               newKey: [UInt8] = (0..<32).map { _ in UInt8.random(in: 0...255) }) throws -> EpochChange {
        try EpochChange.make(session: key.sessionID, epoch: key.epoch + 1, parent: key.head, maker: info.id, identity: identity, removed: [],
                             roster: roster, key: newKey, sealSeed: (0..<32).map { _ in UInt8.random(in: 0...255) })
    }

    /// Mallory makes epoch 1 with her puppet on the roster, and an honest node removes her (epoch
    /// 2). Then the puppet signs two siblings of Mallory's change, each with a lower hash than hers
    /// and Mallory back on the roster. The first loses the fork choice (it would undo her removal);
    /// the second proves the puppet equivocates, and every node removes the puppet too. No node ever
    /// goes back to epoch 1 (each logs every epoch it moves to), Mallory stays removed everywhere,
    /// and the session moves on without both. Before: the puppet's lower sibling won, every node
    /// went back to epoch 1 with Mallory on the roster, and only a re-issue removed her again.
    @Test func aPuppetsLowerSiblingsNeverUndoARemovalAndProveItEquivocates() async throws {
        let cluster = try TestCluster("undo")
        defer { cluster.shutdown() }
        var nodes: [TestNode] = []
        for name in ["a", "b", "c"] { nodes.append(try await startOwnKey(cluster, name)) }
        try await cluster.waitForFullMesh(3)
        let key = try SessionKey.load(from: cluster.key)
        var honest: [[UInt8]] = []
        for node in nodes { honest.append(try #require(bytesFromHex(try await node.request("status")["node"]?.stringValue ?? ""))) }
        let mallory = Identity.generate(), puppet = Identity.generate(), planted = Identity.generate()
        let (malloryInfo, puppetInfo) = (hostileRecord(mallory, "mallory"), hostileRecord(puppet, "puppet"))
        // `planted`: a key on Mallory's roster that no member record names.
        let roster = honest + [mallory.publicKey, puppet.publicKey, planted.publicKey]
        var links = try hostileLinks(nodes, key: key, mallory, malloryInfo, records: [malloryInfo, puppetInfo])
        defer { for link in links { link.close() } }
        for node in nodes {
            try await eventually("\(node.name) to know mallory and her puppet") {
                let names = (try await node.request("members")["members"]?.arrayValue ?? []).compactMap { $0.objectValue?["name"]?.stringValue }
                return names.contains("mallory") && names.contains("puppet")
            }
        }
        let firstKey = (0..<32).map { _ in UInt8.random(in: 0...255) }
        let first = try hostileChange(on: key, by: mallory, malloryInfo, roster: roster, newKey: firstKey)
        for link in links { try link.write(.epochChanges([first])) }
        for node in nodes { try await eventually("\(node.name) on mallory's epoch 1") { try await epoch(node) == 1 } }
        _ = try await nodes[0].request("remove", ["member": .string(hexString(mallory.publicKey))], within: 90)
        for node in nodes { try await eventually("\(node.name) on epoch 2") { try await epoch(node) == 2 } }

        // The puppet links with epoch 1's key: a member the honest removal kept on its roster (a
        // member the remover knows), let in behind. (Epoch 1's own roster lets nobody in any more:
        // its maker is removed.)
        let epoch1 = try SessionKey(bytes: firstKey, epoch: 1, sessionID: key.sessionID, head: first.hash)
        let puppetLinks = try hostileLinks(nodes, key: epoch1, puppet, puppetInfo, records: [puppetInfo])
        links += puppetLinks
        var siblings: [EpochChange] = []
        while siblings.count < 2 {
            let sibling = try hostileChange(on: key, by: puppet, puppetInfo, roster: roster)
            if sibling.hash.lexicographicallyPrecedes(first.hash) { siblings.append(sibling) }
        }
        // One link carries both in order: once a node shows the second's effect, it has taken the first.
        for link in puppetLinks { try link.write(.epochChanges([siblings[0]])); try link.write(.epochChanges([siblings[1]])) }
        for node in nodes {
            try await eventually("\(node.name) to remove the puppet that equivocated", within: 60) {
                let members = try await node.request("members")["members"]?.arrayValue ?? []
                return members.contains { $0.objectValue?["name"]?.stringValue == "puppet" && $0.objectValue?["state"]?.stringValue == "removed" }
            }
        }
        // The puppet was on epoch 2's roster: its removal is re-issued, and the session moves on.
        for node in nodes { try await eventually("\(node.name) past epoch 2", within: 60) { try await epoch(node) >= 3 } }
        for node in nodes {
            let movesToEpoch1 = node.log.components(separatedBy: " is on epoch 1 now").count - 1
            #expect(movesToEpoch1 == 1, "\(node.name) moved to epoch 1 \(movesToEpoch1) times: the puppet's sibling won over the removal")
            let members = try await node.request("members")["members"]?.arrayValue ?? []
            let mallorys = members.filter { $0.objectValue?["name"]?.stringValue == "mallory" }
            #expect(mallorys.allSatisfy { $0.objectValue?["state"]?.stringValue == "removed" }, "\(node.name): \(mallorys)")
        }
        // The planted key links with epoch 1's key (it is on epoch 1's roster, on no honest one):
        // refused, since the roster of a removed maker lets nobody in; never granted a later key.
        let plantedInfo = hostileRecord(planted, "planted")
        for node in nodes {
            try await eventually("\(node.name) to refuse the key Mallory planted on her roster") {
                _ = try? AdversaryLink(addr: node.addr, key: epoch1, identity: planted, info: plantedInfo).close()
                return field(try await node.request("stats"), "refused", Refusal.notOnRoster.rawValue) > 0
            }
        }
        // Mallory tries to link back with the key of epoch 0: refused as removed, by everyone.
        for node in nodes {
            try await eventually("\(node.name) to refuse mallory's node key") {
                _ = try? AdversaryLink(addr: node.addr, key: key, identity: mallory, info: malloryInfo).close()
                return field(try await node.request("stats"), "refused", Refusal.removedNode.rawValue) > 0
            }
        }
    }

    /// Mallory rekeys with the roster {herself}, the lowest hash of many she signs, and sends it to
    /// every honest node. They follow it without its key (locked out); after the re-issue delay
    /// (30 s) one of them removes her on epoch 0, as a sibling that wins over hers, and every node
    /// moves there with the new key; `rekey` then works everywhere. Before: all three stayed on an
    /// epoch whose key they did not hold, and `remove` and `rekey` failed with `not_member` for good.
    @Test func aRosterOfTheMakerAloneLocksNobodyOut() async throws {
        let cluster = try TestCluster("capture")
        defer { cluster.shutdown() }
        var nodes: [TestNode] = []
        for name in ["a", "b", "c"] { nodes.append(try await startOwnKey(cluster, name)) }
        try await cluster.waitForFullMesh(3)
        let key = try SessionKey.load(from: cluster.key)
        let mallory = Identity.generate()
        let info = hostileRecord(mallory, "mallory")
        let links = try hostileLinks(nodes, key: key, mallory, info, records: [info])
        defer { for link in links { link.close() } }
        var capture = try hostileChange(on: key, by: mallory, info, roster: [mallory.publicKey])
        for _ in 0..<64 {
            let change = try hostileChange(on: key, by: mallory, info, roster: [mallory.publicKey])
            if change.hash.lexicographicallyPrecedes(capture.hash) { capture = change }
        }
        for link in links { try link.write(.epochChanges([capture])) }
        for node in nodes {
            try await eventually("\(node.name) to follow mallory's epoch 1") { try await epoch(node) == 1 }
        }
        await expectFailure(.notMember, what: "a rekey on an epoch whose key nobody honest holds") {
            _ = try await nodes[1].request("rekey", within: 60)
        }
        for node in nodes {
            try await eventually("\(node.name) to remove mallory (a counter-change after the 30 s re-issue delay)", within: 120) {
                let members = try await node.request("members")["members"]?.arrayValue ?? []
                return members.contains { $0.objectValue?["name"]?.stringValue == "mallory" && $0.objectValue?["state"]?.stringValue == "removed" }
            }
        }
        let reply = try await nodes[1].request("rekey", within: 60)
        #expect(reply["epoch"]?.intValue == 2)
        for node in nodes { try await eventually("\(node.name) on epoch 2") { try await epoch(node) == 2 } }
    }
}
