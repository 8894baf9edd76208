import Foundation
import HuddleTestSupport
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import Testing

/// Issue 33, item 5, against real `huddle run` processes: a joiner learns every attachment of a
/// journal larger than one link message; a node refuses to run with a name or address its peers
/// would refuse, and refuses a hostname from a peer; a `--join` seed may still be a hostname.
@Suite(.timeLimit(.minutes(10)))
struct JoiningInPartsProcessTests {
    /// 80 honest attachments, each with 16,000 bytes of meta: a journal of about 1.3 MB, more than
    /// the 1.06 MiB one link message may carry. (Before the catch-up went in parts, the joiner's
    /// link reader refused the one journal message, and the joiner never learned any attachment.)
    @Test func aJoinerLearnsEveryAttachmentOfAJournalLargerThanOneLinkMessage() async throws {
        let cluster = try TestCluster("joinpart")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let file = "\(cluster.dir)/small.bin"
        try writeRandomFile(file, count: 100, seed: 33)
        let pad = JSON.string(String(repeating: "x", count: 16_000))
        let count = 80
        for i in 0..<count {
            _ = try await a.request("attach.add", ["path": .string(file), "name": .string("f\(i)"), "meta": .object(["i": .int(Int64(i)), "pad": pad])])
        }
        let b = try await cluster.start("b")
        do {
            try await eventually("b to list all \(count) attachments", within: 120) {
                try await b.request("attach.list")["attachments"]?.arrayValue?.count == count
            }
        } catch {
            Issue.record("\(error)\n\(cluster.logs)")
        }
    }

    /// A member (holding the session key, speaking our codec) names hostnames: another member's
    /// record and a `pingReq` target. Both are refused and counted; the record is not taken.
    @Test func aHostnameFromAPeerIsRefusedAndCounted() async throws {
        let cluster = try TestCluster("hostname")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let identity = Identity.generate()
        let mallory = MemberInfo(id: MemberID(raw: UInt64.random(in: 1...(1 << 52))), node: identity.publicKey, name: "mallory", addr: "127.0.0.1:9").signed(by: identity)
        let link = try AdversaryLink(addr: a.addr, key: try SessionKey.load(from: cluster.key), identity: identity, info: mallory)
        let puppetIdentity = Identity.generate()
        let puppet = MemberInfo(id: MemberID(raw: UInt64.random(in: 1...(1 << 52))), node: puppetIdentity.publicKey, name: "puppet", addr: "puppet.example:7400")
            .signed(by: puppetIdentity)
        try link.write(.pushPull(SWIMPushPull(join: false, members: [mallory, puppet])))
        try link.write(.swim(SWIMMessage(sender: mallory.id, kind: .pingReq(seq: 1, target: puppet.id, targetAddr: "puppet.example:7400"))))
        func refusedHostnames() async throws -> Int64 {
            try await a.request("stats")["refused"]?.objectValue?[Refusal.hostnameAddress.rawValue]?.intValue ?? 0
        }
        try await eventually("a to refuse both hostnames") { try await refusedHostnames() >= 2 }
        let members = try await a.request("members")["members"]?.arrayValue ?? []
        #expect(!members.contains { $0.objectValue?["member"]?.stringValue == puppet.id.description }, "the record naming a hostname is not taken")
        #expect(members.contains { $0.objectValue?["member"]?.stringValue == mallory.id.description })
        #expect(a.process.isRunning)
    }

    /// The user's own `--join` seed may be a hostname: looked up once, off the node's actor.
    @Test func aJoinSeedMayBeAHostname() async throws {
        let cluster = try TestCluster("seedname")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        guard let port = a.addr.split(separator: ":").last else { Issue.record("no port in \(a.addr)"); return }
        try await cluster.start("b", join: ["localhost:\(port)"])
        try await cluster.waitForFullMesh(2)
    }

    @Test func aNameOrAdvertisedAddressPeersWouldRefuseStopsTheNodeAtStart() async throws {
        let cluster = try TestCluster("badrec")
        defer { cluster.shutdown() }
        func run(_ label: String, _ extra: [String]) throws -> HandStartedRun {
            try HandStartedRun(["run", "--key", cluster.key, "--listen", "127.0.0.1:0", "--control", "\(cluster.dir)/\(label).sock",
                                "--data-dir", "\(cluster.dir)/\(label).data"] + extra, stderr: "\(cluster.dir)/\(label).log", umask: "077")
        }
        let longName = try run("name", ["--name", String(repeating: "n", count: 257)])
        let hostname = try run("host", ["--name", "h", "--advertise", "node.example:7400"])
        let longAddress = try run("addr", ["--name", "l", "--advertise", "[::1]:" + String(repeating: "0", count: 70) + "7400"])
        // A node that did start (the check missing) must not outlive the test.
        defer { for started in [longName, hostname, longAddress] { started.kill() } }
        #expect(try await longName.waitForExit() != 0)
        #expect(longName.stderr.contains("at most 256"), "\(longName.stderr)")
        #expect(try await hostname.waitForExit() != 0)
        #expect(hostname.stderr.contains("not a numeric"), "\(hostname.stderr)")
        #expect(try await longAddress.waitForExit() != 0)
        #expect(longAddress.stderr.contains("at most 64"), "\(longAddress.stderr)")
    }
}
