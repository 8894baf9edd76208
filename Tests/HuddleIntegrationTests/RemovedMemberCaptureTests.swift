import Foundation
import HuddleAdversary
import HuddleControl
import HuddleCore
import HuddleCrypto
import Testing

/// What a removed member holds (its epoch-0 key file and its identity), trying every captured
/// datagram and first link handshake message sent to its address.
private struct RemovedMemberKeys {
    let key: SessionKey
    let identity: Identity
    let member: MemberID

    var seal: DatagramSeal { DatagramSeal(key: key.subkey(.datagram)) }

    /// What `record` opens to under these keys, or nil. A link-keyed datagram (version 2) opens
    /// only under the keys of a link to this member; every such link of its was closed and its
    /// keys dropped by both ends at the removal, so the caller counts those apart.
    func open(_ record: AddressCapture.Record) -> String? {
        switch record.kind {
        case .datagram:
            guard record.bytes.first == DatagramSeal.version, let plain = try? seal.open(record.bytes) else { return nil }
            return "a session-key datagram: \((try? DatagramPayload.decode(plain)).map { "\($0.content)" } ?? "\(plain.count) bytes")"
        case .firstFrame:
            guard var responder = try? LinkHandshake(role: .responder, sessionKey: key, identity: identity, appPayload: []),
                  (try? responder.receive(record.bytes)) != nil else { return nil }
            return "a link handshake's first message"
        }
    }

    /// A bare ping to `target`, sealed under the session key this member holds (what it sends to
    /// a member it has no link to).
    func ping(_ target: MemberID, seq: UInt32, counter: UInt64) -> [UInt8] {
        let message = SWIMMessage(sender: member, kind: .ping(seq: seq, target: target))
        return seal.seal(DatagramPayload(sender: member, counter: counter, content: .swim(message)).encoded())
    }
}

/// Issue 21's acceptance: "remove a member of 5 — a capture of its traffic shows nothing it can
/// decrypt after the removal". The member's process is stopped and the test takes over its
/// address (UDP and TCP), so everything the others send it is recorded — before the removal (the
/// control: what its keys open there) and after it, while the four exchange messages and an
/// attachment and the test, holding everything the removed member held, keeps pinging them and
/// dialing links from that address as it would.
@Suite(.timeLimit(.minutes(10)))
struct RemovedMemberCaptureTests {
    @Test func aCaptureOfARemovedMembersTrafficHoldsNothingItCanOpen() async throws {
        let cluster = try TestCluster("rmcap")
        defer { cluster.shutdown() }
        var nodes: [TestNode] = []
        // d's address is a relay's the test holds from the start: when d stops, the test takes its
        // bound sockets over (never closed in between), so no other process can take d's port.
        let relay = try StallableRelay()
        defer { relay.close() }
        for name in ["a", "b", "c"] { nodes.append(try await startOwnKey(cluster, name)) }
        try FileManager.default.copyItem(atPath: cluster.key, toPath: "\(cluster.dir)/d.key")
        chmod("\(cluster.dir)/d.key", 0o600)
        nodes.append(try await cluster.startBehindRelay("d", key: "\(cluster.dir)/d.key", extra: ["--identity", "\(cluster.dir)/d.id"], relay: relay).0)
        nodes.append(try await startOwnKey(cluster, "e"))
        try await cluster.waitForFullMesh(5)
        let removed = nodes[3]
        let remaining = nodes.filter { $0.name != "d" }
        let node = try #require(try await removed.request("status")["node"]?.stringValue)
        let held = RemovedMemberKeys(key: try SessionKey.load(from: "\(cluster.dir)/d.key"),
                                     identity: try Identity.loadOrCreate(path: "\(cluster.dir)/d.id"),
                                     member: try #require(MemberID(removed.member)))
        #expect(held.key.epoch == 0)
        var targets: [(addr: String, member: MemberID)] = []
        for node in remaining { targets.append((node.addr, try #require(MemberID(node.member)))) }
        #expect(removed.addr == relay.addr)

        // d stops; the test takes over its address (the relay's sockets).
        kill(removed.process.processIdentifier, SIGKILL)
        _ = try await removed.waitForExit()
        let capture = AddressCapture()
        let sockets = try await relay.handOver()
        try await capture.start(tcp: sockets.tcp, udp: sockets.udp)
        defer { Task { await capture.stop() } }
        // Round `round` of pings: counters and seqs grow with the round, as d's own would.
        let pingEveryone: @Sendable (Int) async throws -> Void = { [held, targets] round in
            for (i, target) in targets.enumerated() {
                let n = 1_000 + round * targets.count + i
                try await capture.send(held.ping(target.member, seq: UInt32(n), counter: UInt64(n)), to: target.addr)
            }
        }
        var round = 0

        // The control: before the removal, d's keys open what the others send to its address
        // (acks to its pings once its link keys are gone, or a link dialed to it).
        try await eventually("something sent to d's address that d's keys open, before the removal", within: 60) {
            round += 1
            try await pingEveryone(round)
            try await Task.sleep(for: .milliseconds(300))
            return await capture.records.contains { held.open($0) != nil }
        }

        _ = try await nodes[0].request("remove", ["member": .string(node)], within: 60)
        for node in remaining { try await eventually("\(node.name) on epoch 1", within: 60) { try await epoch(node) == 1 } }
        let cut = ContinuousClock.now

        // After the removal: the four exchange messages and an attachment, while "d" keeps pinging
        // them with the key it holds and dials each for a link.
        let pinger = Task { [round] in
            var next = round
            while !Task.isCancelled {
                next += 1
                try? await pingEveryone(next)
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        var collectors: [EventCollector] = []
        for node in remaining { collectors.append(try await EventCollector.subscribe(node, topics: ["messages"])) }
        for node in remaining { _ = try await node.request("send", ["text": .string("after the removal from \(node.name)")]) }
        let file = "\(cluster.dir)/after.bin"
        try Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 17) }).write(to: URL(fileURLWithPath: file))
        let id = try await nodes[0].request("attach.add", ["path": .string(file)])["attachment"]?.objectValue?["id"]?.stringValue ?? ""
        for node in remaining.dropFirst() {
            let out = "\(cluster.dir)/\(node.name)-after.bin"
            _ = try await node.request("attach.get", ["id": .string(id), "path": .string(out), "timeout_ms": 60_000], within: 90)
            #expect(FileManager.default.contents(atPath: out) == FileManager.default.contents(atPath: file))
        }
        for collector in collectors {
            try await eventually("every message after the removal to arrive", within: 60) {
                await collector.messages().filter { $0["text"]?.stringValue?.hasPrefix("after the removal") == true }.count == remaining.count
            }
        }
        // d dials each of the four with the key it holds, as the initiator of a link.
        var dialsAnswered = 0
        for target in targets {
            let (frames, answered) = try await exchangeFrames(with: target.addr) { [held] in
                var dialer = try LinkHandshake(role: .initiator, sessionKey: held.key, identity: held.identity, appPayload: [])
                let first = try dialer.start()
                return (first, { frame in (try? dialer.receive(frame)) ?? nil })
            }
            // At most the responder's handshake message (an older key within the grace opens its
            // first message; the node key is refused when it shows, in the third): never a link frame.
            #expect(frames.count <= 1, "\(target.addr) sent d \(frames.count) frames: a link came up")
            dialsAnswered += answered
        }
        // A fixed window after everything above: longer than link keys stay usable once retired
        // (`DatagramKeyring.grace`), so anything still sealed for d would be sent in it.
        try await Task.sleep(for: .seconds(DatagramKeyring.grace + 1))
        pinger.cancel()
        _ = await pinger.value
        try await Task.sleep(for: .milliseconds(500))

        let records = await capture.records
        let before = records.filter { $0.at < cut }, after = records.filter { $0.at >= cut }
        let openedBefore = before.compactMap(held.open)
        #expect(!openedBefore.isEmpty, "the control: d's keys open something sent to it before the removal")
        let openedAfter = after.compactMap(held.open)
        #expect(openedAfter.isEmpty, "sent to d after its removal and opened with what it holds: \(openedAfter.prefix(5))")
        let linkKeyedAfter = after.filter { $0.kind == .datagram && $0.bytes.first == PairDatagramSeal.version }
        #expect(linkKeyedAfter.isEmpty, "\(linkKeyedAfter.count) link-keyed datagrams sealed for d after its removal")
        // Stronger: the session sends a removed member nothing at all, not even a probe under the
        // new key (SessionCore.datagram drops SWIM's pings to it).
        #expect(after.isEmpty, "sent to d's address after its removal: \(after.map { "\($0.kind) v\($0.bytes.first ?? 0) \($0.bytes.count) B" }.prefix(5))")
        // The probes reached the four: each refused d's pings as a removed node's.
        for node in remaining {
            #expect(field(try await node.request("stats"), "refused", "removed_node") > 0, "\(node.name) refused d")
            #expect(try await node.aliveMembers() == 4)
        }
        print("capture of d's address: \(before.count) records before the removal (\(openedBefore.count) open with d's keys, \(openedBefore.filter { $0.hasPrefix("a link") }.count) of them link dials), \(after.count) after; d's own dials: \(dialsAnswered) of \(targets.count) got a handshake message 2 that opened under its old key, no link came up")
        for collector in collectors { await collector.stop() }
    }
}
