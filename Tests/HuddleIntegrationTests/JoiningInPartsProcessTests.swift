import Foundation
import HuddleControl
import Testing

/// Issue 33, item 5, against real `huddle run` processes: a joiner learns every attachment of a
/// journal larger than one link message, and a node refuses to run with a name or address its
/// peers would refuse.
@Suite(.timeLimit(.minutes(3)))
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
            try await eventually("b to list all \(count) attachments", within: 30) {
                try await b.request("attach.list")["attachments"]?.arrayValue?.count == count
            }
        } catch {
            Issue.record("\(error)\n\(cluster.logs)")
        }
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
