import Foundation
import HuddleControl
import Testing

/// `huddle doctor` against real nodes: each problem of the acceptance is one line of its
/// output, and it returns (within its own 5 s deadline: `DoctorCommand.deadline`).
@Suite struct DoctorProcessTests {
    /// `huddle doctor --json` on `node`: its exit status, findings and how long it took.
    func doctor(_ node: TestNode) async throws -> (status: Int32, findings: [String], elapsedMs: Int64, report: JSONObject) {
        let run = try await runCLI(["doctor", "--json", "--socket", node.control])
        let reply = try JSON.parse(run.stdout).objectValue ?? [:]
        let findings = (reply["findings"]?.arrayValue ?? []).compactMap(\.stringValue)
        let elapsed = reply["elapsed_ms"]?.intValue ?? -1
        print("doctor on \(node.name): exit \(run.status), \(elapsed) ms, findings: \(findings)")
        return (run.status, findings, elapsed, reply["report"]?.objectValue ?? [:])
    }

    /// A loopback TCP port nothing listens on (bound, then closed).
    func unusedLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw TestTimeout(description: "no free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test func aHealthyNodeThenAKeyFileWithLoosePermissions() async throws {
        let cluster = try TestCluster("doctor-key")
        defer { cluster.shutdown() }
        let a = try await startOwnKey(cluster, "a")
        let healthy = try await doctor(a)
        #expect(healthy.status == 0 && healthy.findings.isEmpty, "\(healthy.findings)")
        let plain = try await runCLI(["doctor", "--socket", a.control])
        #expect(plain.status == 0 && plain.stdout.hasPrefix("healthy: 1 member known, epoch 0"), "\(plain.stdout)")

        chmod("\(cluster.dir)/a.key", 0o644)
        let loose = try await doctor(a)
        #expect(loose.status == 1)
        #expect(loose.findings == ["key file \(cluster.dir)/a.key has mode 0644: others on this host can read the session key; run: chmod 600 \(cluster.dir)/a.key"])
    }

    @Test func aMemberWhoseAdvertisedAddressIsUnreachable() async throws {
        let cluster = try TestCluster("doctor-adv")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let bogus = "127.0.0.1:\(try unusedLoopbackPort())"
        let b = try await cluster.start("b", extra: ["--advertise", bogus])
        try await eventually("a to know b") {
            let members = try await a.request("members")["members"]?.arrayValue ?? []
            return members.contains { $0.objectValue?["member"]?.stringValue == b.member }
        }
        let seenByA = try await doctor(a)
        #expect(seenByA.status == 1)
        let aboutB = seenByA.findings.filter { $0.contains(b.member) && $0.contains(bogus) }
        #expect(aboutB.contains { $0.contains("unreachable over TCP from this node (connection refused)") }, "\(seenByA.findings)")
        #expect(aboutB.contains { $0.contains("unreachable over UDP from this node (port unreachable (ICMP))") }, "\(seenByA.findings)")
        #expect(!seenByA.findings.contains { $0.hasPrefix("this node advertises") }, "a's own address answers: \(seenByA.findings)")

        let seenByB = try await doctor(b)
        #expect(seenByB.findings.contains { $0.hasPrefix("this node advertises \(bogus), unreachable over TCP") }, "\(seenByB.findings)")
    }

    @Test func aMemberOnAnOldEpoch() async throws {
        let cluster = try TestCluster("doctor-epoch")
        var relays: [StallableRelay] = []
        defer {
            for relay in relays { relay.close() }
            cluster.shutdown()
        }
        let (a, b, c) = try await startTrioBehindRelays(cluster, relays: &relays)
        // c's links stall at the relays through a rotation (as in EpochProcessTests), while SWIM's
        // datagrams still cross: c stays alive, on epoch 0, while a and b move to epoch 1.
        try await stallLinks(of: c, relays: relays)
        _ = try await a.request("rekey", within: 60)
        #expect(try await epoch(c) == 0)
        let seenByA = try await doctor(a)
        #expect(seenByA.status == 1)
        let behind = seenByA.findings.filter { $0.contains(c.member) && $0.contains("is on epoch 0, behind this node's 1") }
        #expect(behind.count == 1, "\(seenByA.findings)")
        #expect(!seenByA.findings.contains { $0.contains(b.member) && $0.contains("epoch") }, "b is on a's epoch: \(seenByA.findings)")
        for relay in relays { relay.resume() }
        try await eventually("c on epoch 1", within: 60) { try await epoch(c) == 1 }
    }

    /// b's wall clock reads 12.3 s ahead (the test-only `HUDDLE_TEST_CLOCK_OFFSET_MS`, as a host
    /// whose clock is off): a's doctor says so in one line about b, b's says a is behind; with one
    /// clock, no skew finding, and every linked member has a round-trip time over its link.
    @Test func aMemberWhoseClockIsAhead() async throws {
        let cluster = try TestCluster("doctor-skew")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b", environment: ["HUDDLE_TEST_CLOCK_OFFSET_MS": "12300"])
        try await cluster.waitForFullMesh(2)
        let seenByA = try await doctor(a)
        #expect(seenByA.status == 1)
        #expect(seenByA.findings.count == 1, "\(seenByA.findings)")
        let aboutB = try #require(seenByA.findings.first)
        #expect(aboutB.hasPrefix("the clock of member b (\(b.member)) is ") && aboutB.contains(" s ahead of this node's: ")
                && aboutB.hasSuffix("sync both hosts' clocks (NTP, e.g. timedatectl set-ntp true)"), "\(aboutB)")
        // The seconds it names: 12.3, give or take the measurement's error on a busy machine.
        let named = Double(aboutB.dropFirst("the clock of member b (\(b.member)) is ".count).prefix { $0 != " " }) ?? 0
        #expect(abs(named - 12.3) <= 0.2, "\(aboutB)")
        let row = try #require(seenByA.report["members"]?.arrayValue?.compactMap(\.objectValue).first { $0["member"]?.stringValue == b.member })
        let skew = try #require(Diagnosis.number(row["clock_skew_ms"]))
        #expect(abs(skew - 12_300) <= max(50, Diagnosis.number(row["clock_skew_error_ms"]) ?? 0), "skew \(skew) ms")
        let seenByB = try await doctor(b)
        #expect(seenByB.status == 1)
        #expect(seenByB.findings.count == 1 && seenByB.findings.allSatisfy { $0.hasPrefix("the clock of member a (\(a.member)) is 12.") && $0.contains(" s behind this node's: ") },
                "\(seenByB.findings)")

        let c = try await cluster.start("c")
        try await cluster.waitForFullMesh(3)
        let seenByC = try await doctor(c)
        #expect(seenByC.findings.count == 1 && seenByC.findings.allSatisfy { $0.hasPrefix("the clock of member b (\(b.member)) is 12.") }, "only b's clock is off: \(seenByC.findings)")
    }

    @Test func linkedMembersHaveARoundTripTimeAndNoSkewOnOneClock() async throws {
        let cluster = try TestCluster("doctor-rtt")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let seenByA = try await doctor(a)
        #expect(seenByA.status == 0 && seenByA.findings.isEmpty, "\(seenByA.findings)")
        let rows = seenByA.report["members"]?.arrayValue?.compactMap(\.objectValue) ?? []
        let row = try #require(rows.first { $0["member"]?.stringValue == b.member })
        let rtt = try #require(Diagnosis.number(row["rtt_ms"]), "\(row)")
        // Loopback, a busy machine: positive and under the exchange's own timeout.
        #expect(rtt > 0 && rtt < 5000, "rtt \(rtt) ms")
        let skew = try #require(Diagnosis.number(row["clock_skew_ms"]))
        #expect(abs(skew) <= max(50, rtt), "one clock: skew \(skew) ms")
        let me = try #require(rows.first { $0["self"] == .bool(true) })
        #expect(me["rtt_ms"] == .null && me["clock_skew_ms"] == .null)
        // CONTROL.md's `members` carries it too.
        let members = try await a.request("members")["members"]?.arrayValue?.compactMap(\.objectValue) ?? []
        let listed = try #require(members.first { $0["member"]?.stringValue == b.member })
        #expect((Diagnosis.number(listed["rtt_ms"]) ?? 0) > 0, "\(listed)")
        let verbose = try await runCLI(["doctor", "--verbose", "--socket", a.control])
        #expect(verbose.stdout.contains("RTT") && verbose.stdout.contains("CLOCK SKEW"), "\(verbose.stdout)")
    }

    @Test func noNodeAndAStoppedNodeAreOneFindingEach() async throws {
        let cluster = try TestCluster("doctor-none")
        defer { cluster.shutdown() }
        let none = try await runCLI(["doctor", "--socket", "\(cluster.dir)/nobody.sock"])
        #expect(none.status == 1)
        #expect(none.stdout == "no node answers on \(cluster.dir)/nobody.sock: start one (huddle run --key FILE --control \(cluster.dir)/nobody.sock), or name its socket with --socket\n")

        // A stopped node takes the connection (the kernel's backlog) and never answers: the
        // doctor's own deadline ends the run.
        let a = try await startOwnKey(cluster, "a")
        kill(a.process.processIdentifier, SIGSTOP)
        defer { kill(a.process.processIdentifier, SIGCONT) }
        let stuck = try await doctor(a)
        #expect(stuck.status == 1)
        #expect(stuck.findings == ["the node at \(a.control) did not answer within 5 s: it is stuck or overloaded"])
        #expect(stuck.elapsedMs >= 5000)
    }
}
