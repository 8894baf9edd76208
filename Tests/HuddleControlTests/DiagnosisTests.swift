import HuddleControl
import Testing

/// `Diagnosis.findings`: the facts of a `diagnose` report in, one line per problem out.
@Suite struct DiagnosisTests {
    static func member(_ name: String, id: String, isSelf: Bool = false, state: String = "alive", epoch: JSON = .int(1),
                       tcp: Bool = true, udp: Bool = true, skew: JSON = .double(3.5), skewError: JSON = .double(0.2)) -> JSON {
        .object(["member": .string(id), "name": .string(name), "addr": .string("127.0.0.1:7401"), "self": .bool(isSelf),
                 "state": .string(state), "linked": .bool(true), "last_heard_ms": .int(1500), "epoch": epoch,
                 "rtt_ms": .double(0.4), "clock_skew_ms": skew, "clock_skew_error_ms": skewError,
                 "tcp": .object(["ok": .bool(tcp), "ms": tcp ? .int(1) : .null, "error": tcp ? .null : .string("connection refused")]),
                 "udp": .object(["ok": .bool(udp), "ms": .null, "error": udp ? .null : .string("port unreachable (ICMP)")])])
    }

    static func report(mode: String = "600", members: [JSON], used: Int64 = 0, risks: [Double] = []) -> JSONObject {
        ["key_file": .object(["path": .string("/k"), "mode": .string(mode)]), "epoch": .int(1), "members": .array(members),
         "store": .object(["used": .int(used), "limit": .int(1000)]),
         "subscribers": .array(risks.map { .object(["events_behind": .int(42), "overflow_risk": .double($0)]) })]
    }

    /// Issue 36: no member reachable. A node alone whose `--join` address does not answer says so,
    /// and what is needed; once another member is there, the failure is no finding.
    @Test func aNodeAloneWhoseJoinAddressDoesNotAnswerSaysAMemberMustBeReachable() {
        var alone = Self.report(members: [Self.member("a", id: "a1", isSelf: true)])
        alone["joining"] = .array([.object(["addr": .string("192.0.2.7:7400"), "seconds": .int(42), "error": .string("connection timed out")])])
        #expect(Diagnosis.findings(alone) == [
            "this node has joined no session: --join 192.0.2.7:7400 has not answered for 42 s (connection timed out): a member must be reachable from here, one with a public address or one behind a router that forwards its port (TCP and UDP) to it and runs with --advertise ROUTER_ADDRESS:PORT",
        ])
        var joined = alone
        joined["members"] = .array([Self.member("a", id: "a1", isSelf: true), Self.member("b", id: "b1")])
        #expect(Diagnosis.findings(joined).isEmpty)
    }

    @Test func aHealthyReportHasNoFinding() {
        #expect(Diagnosis.findings(Self.report(members: [Self.member("a", id: "a1", isSelf: true), Self.member("b", id: "b1")], risks: [0.1])).isEmpty)
    }

    @Test func eachProblemIsOneLine() {
        let findings = Diagnosis.findings(Self.report(mode: "644", members: [
            Self.member("a", id: "a1", isSelf: true, tcp: false),
            Self.member("b", id: "b1", udp: false),
            Self.member("c", id: "c1", state: "failed", epoch: .int(0)),
            Self.member("d", id: "d1", state: "left", tcp: false),
        ], used: 950, risks: [0.7, 0.1]))
        #expect(findings == [
            "key file /k has mode 0644: others on this host can read the session key; run: chmod 600 /k",
            "this node advertises 127.0.0.1:7401, unreachable over TCP from this node (connection refused): members cannot reach it there; fix --advertise (or the firewall or port forwarding)",
            "member b (b1) advertises 127.0.0.1:7401, unreachable over UDP from this node (port unreachable (ICMP)): fix its --advertise, or the firewall between the two",
            "member c (c1) at 127.0.0.1:7401 is failed (last heard 1.5 s ago): check it is running and reachable",
            "member c (c1) is on epoch 0, behind this node's 1: it does not hold the current session key; check its links (it is handed the key when it links), or remove it",
            "the store holds 950 of its 1000 bytes (95%): new chunks will be refused; raise --store-limit or remove attachments",
            "1 event subscriber is falling behind (up to 42 events unread): it will get an overflow; read events faster or subscribe to fewer topics",
        ])
        #expect(findings.allSatisfy { !$0.contains("\n") })
    }

    /// Beyond 2 s, net of the measurement's error, one line naming the member, how far and which way.
    @Test func aClockSkewBeyondTheThresholdIsOneLine() {
        let findings = Diagnosis.findings(Self.report(members: [
            Self.member("a", id: "a1", isSelf: true, skew: .null, skewError: .null),
            Self.member("b", id: "b1", skew: .double(12_345.6)),
            Self.member("c", id: "c1", skew: .int(-2_500), skewError: .int(100)),
            Self.member("d", id: "d1", skew: .double(2_100), skewError: .double(150)),   // within the error of 2 s
            Self.member("e", id: "e1", skew: .double(-1_999)),
            Self.member("f", id: "f1", skew: .null, skewError: .null),                  // not measured
        ]))
        let fix = "activity sets within that of each other are ordered by the clocks, not as they were made, and logs disagree; sync both hosts' clocks (NTP, e.g. timedatectl set-ntp true)"
        #expect(findings == [
            "the clock of member b (b1) is 12.3 s ahead of this node's: \(fix)",
            "the clock of member c (c1) is 2.5 s behind this node's: \(fix)",
        ])
    }
}
