import Foundation
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import HuddleTestSupport
import Testing

/// Issue 33: admins are the session's signed state, made with the key by `huddle keygen --admin`,
/// changed by an admin's signed epoch change, checked by every node; `--admins` is retired.
@Suite(.timeLimit(.minutes(10)))
struct AdminProcessTests {
    private func admins(_ node: TestNode) async throws -> [String] {
        (try await node.request("status")["admins"]?.arrayValue ?? []).compactMap(\.stringValue)
    }

    /// a is the admin the key was made with. A non-admin's `remove`, `rekey` and admin change are
    /// refused by its own node; a hostile member's signed removal and self-promotion are refused by
    /// every node; one holding the key with an edited admin list cannot even link. Then a hands
    /// the admin role to b (c is down meanwhile): every node, c restarted from its data directory
    /// included, shows b alone as admin, a's rekey is refused, b's is taken everywhere.
    @Test func nonAdminsAreRefusedEverywhereAndAnAdminChangeHoldsAtEveryNodeAcrossARestart() async throws {
        let cluster = try TestCluster("admins")
        defer { cluster.shutdown() }
        try FileManager.default.removeItem(atPath: cluster.key)
        let made = try await runCLI(["keygen", "--out", cluster.key, "--admin", "\(cluster.dir)/a.id"])
        #expect(made.status == 0 && made.stdout.contains("1 admin"), "\(made)")
        let adminA = try Identity.loadOrCreate(path: "\(cluster.dir)/a.id").publicKey
        let key = try SessionKey.load(from: cluster.key)
        #expect(key.admins == [adminA])

        let retired = try await runCLI(["run", "--key", cluster.key, "--admins", "\(cluster.dir)/admins", "--listen", "127.0.0.1:0",
                                        "--control", "\(cluster.dir)/retired.sock"])
        #expect(retired.status == 2 && retired.stderr.contains("--admins is retired") && retired.stderr.contains("keygen --admin"), "\(retired)")

        let a = try await startOwnKey(cluster, "a", identity: true)
        let b = try await startOwnKey(cluster, "b", join: [a.addr], identity: true)
        var c = try await startOwnKey(cluster, "c", join: [a.addr], identity: true)
        try await cluster.waitForFullMesh(3)
        for node in [a, b, c] { #expect(try await admins(node) == [hexString(adminA)]) }
        let bNode = try #require(bytesFromHex(try await b.request("status")["node"]?.stringValue ?? ""))

        // A non-admin asks its own node: refused there, nothing sent.
        await expectFailure(.notMember, what: "a rekey by a non-admin") { _ = try await b.request("rekey") }
        await expectFailure(.notMember, what: "a removal by a non-admin") { _ = try await b.request("remove", ["member": .string(c.member)]) }
        await expectFailure(.notMember, what: "an admin change by a non-admin") {
            _ = try await b.request("admins", ["add": .array([.string(hexString(bNode))])])
        }
        #expect(field(try await b.request("stats"), "refused", "epoch_not_admin") == 3)
        let cli = try await runCLI(["remove", c.member, "--control", b.control])
        #expect(cli.status != 0 && cli.stderr.contains("not an admin"), "\(cli)")

        // A hostile member holding the key signs a removal of b and an admin change naming itself.
        let mallory = Identity.generate()
        let info = MemberInfo(id: MemberID(raw: UInt64.random(in: 1...(1 << 52))), node: mallory.publicKey, name: "mallory", addr: "127.0.0.1:9").signed(by: mallory)
        func change(removing removed: [[UInt8]], admins: [[UInt8]]) throws -> EpochChange {
            try EpochChange.make(session: key.sessionID, epoch: 1, parent: key.head, maker: info.id, identity: mallory, madeAt: 1,
                                 removed: removed, roster: [adminA, mallory.publicKey], admins: admins,
                                 key: (0..<32).map { _ in UInt8.random(in: 0...255) }, sealSeed: (0..<32).map { _ in UInt8.random(in: 0...255) })
        }
        let removal = try change(removing: [bNode], admins: [adminA])
        let grab = try change(removing: [], admins: [adminA, mallory.publicKey])
        let before = try await a.request("stats")
        let links = try [a, b, c].map { node in
            let link = try AdversaryLink(addr: node.addr, key: key, identity: mallory, info: info)
            try link.write(.pushPull(SWIMPushPull(join: false, members: [info])))
            return link
        }
        defer { for link in links { link.close() } }
        for node in [a, b, c] {
            try await eventually("\(node.name) to know mallory") {
                (try await node.request("members")["members"]?.arrayValue ?? []).contains { $0.objectValue?["name"]?.stringValue == "mallory" }
            }
        }
        for link in links {
            try link.write(.epochChanges([removal]))
            try link.write(.epochChanges([grab]))
        }
        for node in [a, b, c] {
            let floor = node === a ? field(before, "refused", "epoch_not_admin") : (node === b ? 4 : 0)
            try await eventually("\(node.name) to refuse both hostile changes as a non-admin's") {
                field(try await node.request("stats"), "refused", "epoch_not_admin") >= floor + 2
            }
            let (onEpoch, held) = (try await epoch(node), try await admins(node))
            #expect(onEpoch == 0 && held == [hexString(adminA)])
        }
        let atA = try await a.request("members")["members"]?.arrayValue ?? []
        #expect(atA.contains { $0.objectValue?["member"]?.stringValue == b.member && $0.objectValue?["state"]?.stringValue == "alive" },
                "b is not removed: \(atA)")
        // The same key with an edited admin list (mallory's own): another session, no link at all.
        let edited = try SessionKey(bytes: key.bytes, admins: [mallory.publicKey])
        #expect(edited.fingerprint != key.fingerprint)
        #expect(throws: (any Error).self) { _ = try AdversaryLink(addr: a.addr, key: edited, identity: mallory, info: info) }

        // a hands the admin role to b while c is down; c comes back from its data directory.
        c.kill()
        _ = try await c.waitForExit()
        let handed = try await runCLI(["admins", "--add", hexString(bNode), "--remove", hexString(adminA), "--control", a.control])
        #expect(handed.status == 0 && handed.stdout.contains(hexString(bNode)) && handed.stdout.contains("epoch 1"), "\(handed)")
        for node in [a, b] {
            try await eventually("\(node.name) with b alone as admin") { try await admins(node) == [hexString(bNode)] }
        }
        await expectFailure(.notMember, what: "a rekey by the former admin") { _ = try await a.request("rekey") }
        #expect(try await b.request("rekey", within: 60)["epoch"]?.intValue == 2)
        c = try await startOwnKey(cluster, "c", join: [a.addr], identity: true)
        try await eventually("the restarted c on epoch 2 with b alone as admin", within: 60) {
            let (onEpoch, held) = (try await epoch(c), try await admins(c))
            return onEpoch == 2 && held == [hexString(bNode)]
        }
        for node in [a, b] { #expect(try await epoch(node) == 2) }
        await expectFailure(.notMember, what: "a removal by c, no admin") { _ = try await c.request("remove", ["member": .string(a.member)]) }
        // Rewritten on c's I/O queue a moment after the epoch moved (NodeIO).
        try await eventually("c's key file to hold the admin set it moved to") { try SessionKey.load(from: "\(cluster.dir)/c.key").admins == [bNode] }
    }
}
