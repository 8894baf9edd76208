import Foundation
import HuddleTestSupport
import HuddleControl
import HuddleSim
import Testing

// The multi-host fault suite (issue 6). Every scenario runs real `huddle run` processes, one per
// network namespace ("host") on a private bridge, injects faults with nft / signals, and decides
// pass or fail from the nodes' event streams and `status` / `members` / `stats`. Each prints one
// `hosts: …` line with what it measured.
//
/// Prints one line of the suite's results.
func report(_ line: String) {
    FileHandle.standardOutput.write(Data("hosts: \(line)\n".utf8))
}

private let runScenarios = !HostEnvironment.skipRequested && HostEnvironment.usable

private func f1(_ x: Double) -> String { String(format: "%.1f", x) }

@Suite("Several hosts (network namespaces)", .serialized, .timeLimit(.minutes(10)))
struct HostScenarios {
    /// The suite's precondition, said on one loud line: without namespaces the suite fails unless
    /// HUDDLE_SKIP_HOSTS=1 is set explicitly (then it says it is skipped).
    @Test func hostNamespacesCanBeCreated() {
        if HostEnvironment.skipRequested {
            report("SKIPPED: HUDDLE_SKIP_HOSTS=1 is set, the multi-host suite did not run")
            return
        }
        if let reason = HostEnvironment.unusableReason {
            Issue.record("hosts: FAILED: cannot create network namespace hosts: \(reason). Run the tests as root, or set HUDDLE_SKIP_HOSTS=1 to skip this suite.")
        }
    }

    /// 5 hosts, 10 % random loss in and out of two of them (one of them a sender); 3 senders × 500
    /// reliable broadcasts. Membership stays stable and delivery is exactly once, causal, complete.
    @Test(.enabled(if: runScenarios)) func lossyHostsKeepMembershipAndDeliverEverythingOnceInOrder() async throws {
        let lab = try HostLab("loss", hosts: 5)
        defer { lab.teardown() }
        let nodes = try await lab.startAll()
        var streams: [HostEvents] = []
        for node in nodes { streams.append(try await HostEvents.subscribe(node, topics: ["members", "messages"])) }
        let lossy = [3, 4]
        for i in lossy { try lab.loss(i, percent: 10) }
        let senders = [0, 1, 3]
        let perSender = 500
        let start = ContinuousClock.now
        let sent = try await withThrowingTaskGroup(of: [String].self) { group in
            for s in senders {
                let node = nodes[s]
                group.addTask {
                    let client = try await node.client()
                    var ids: [String] = []
                    for i in 0..<perSender {
                        let reply = try await client.ask("send", ["text": .string("\(node.name)-\(i)")])
                        ids.append(reply["msg"]?.stringValue ?? "")
                    }
                    await client.close()
                    return ids
                }
            }
            var all: [String] = []
            for try await ids in group { all += ids }
            return all
        }
        let sendSeconds = (ContinuousClock.now - start).seconds
        let total = senders.count * perSender
        let sentSet = Set(sent)
        #expect(sentSet.count == total, "send replies carried \(sentSet.count) distinct ids for \(total) sends")
        do {
            try await eventually("all \(total) messages at every host", within: 150, every: .milliseconds(250)) {
                for stream in streams where await stream.messages().count < total { return false }
                return true
            }
        } catch {
            var counts: [String] = []
            for stream in streams { counts.append("\(stream.node.name)=\(await stream.messages().count)") }
            Issue.record("\(error); delivered: \(counts.joined(separator: " "))\n\(lab.logs)")
            return
        }
        let deliverSeconds = (ContinuousClock.now - start).seconds
        // Membership must stay stable for the whole lossy period: keep the loss on for 20 s in all
        // (a fault duration, not a speed assumption). This also lets any duplicate still on its way
        // arrive before "exactly once" is judged.
        let lossHeld = Duration.seconds(20) - (ContinuousClock.now - start)
        if lossHeld > .zero { try await Task.sleep(for: lossHeld) }
        var problems = try await deliveryViolations(streams)
        for stream in streams {
            let got = await stream.messages().compactMap(Delivered.init)
            if got.count != total { problems.append("\(stream.node.name) delivered \(got.count) messages, not \(total)") }
            let missing = sentSet.subtracting(got.map(\.msg))
            if !missing.isEmpty { problems.append("\(stream.node.name) never delivered \(missing.count) sent messages") }
        }
        var retransmits: Int64 = 0, refusedSends: Int64 = 0
        for node in nodes {
            let stats = try await node.request("stats")
            retransmits += stats["retransmits"]?.intValue ?? 0
            refusedSends += stats["datagram_send_errors"]?.intValue ?? 0
        }
        // Under loss a member may be `suspect` at any moment (a probe and its indirect probes lost):
        // that is SWIM working; `failed` or `left` (counted below) is what the scenario forbids. Once the loss
        // is lifted, every view must come back to all members alive.
        let lossSeconds = (ContinuousClock.now - start).seconds
        for i in lossy { try lab.clearLoss(i) }
        do {
            try await eventually("every host lists all \(nodes.count) members alive once the loss is lifted", within: 60, every: .milliseconds(250)) {
                for node in nodes where try await node.aliveMembers().count != nodes.count { return false }
                return true
            }
        } catch {
            for node in nodes {
                let alive = try await node.aliveMembers().count
                if alive != nodes.count { problems.append("\(node.name) ends with \(alive) alive members after the loss was lifted") }
            }
        }
        var failed: [String] = []
        var suspects = 0
        for stream in streams {
            for e in await stream.memberChanges("failed") + stream.memberChanges("left") {
                failed.append("\(stream.node.name) saw \(e.event["member"]?.objectValue?["name"]?.stringValue ?? "?") \(e.event["change"]?.stringValue ?? "")")
            }
            suspects += await stream.memberChanges("suspect").count
        }
        for stream in streams { await stream.stop() }
        await expectNoOverflows(streams)
        report("loss 10% in+out on 2 of 5: \(total)/\(total) messages exactly once in causal order at all 5 "
            + "(sent in \(f1(sendSeconds)) s, everywhere after \(f1(deliverSeconds)) s), "
            + "over \(f1(lossSeconds)) s of loss \(failed.count) failed, \(suspects) suspect events, \(retransmits) retransmits, \(refusedSends) datagrams refused by the firewall"
            + (problems.isEmpty ? "" : ", \(problems.count) VIOLATIONS"))
        #expect(failed.isEmpty, "live members marked failed or left under 10 % loss: \(failed)")
        #expect(problems.isEmpty, "\(problems.prefix(10))")
    }

    /// A host stopped (SIGSTOP) for 40 % of the minimum suspicion timeout (1 s with the node's SWIM
    /// defaults) is never marked failed; one stopped until every other host has marked it failed
    /// (at most 20 s) is, and after SIGCONT it is alive again everywhere as the same member
    /// (refuted or re-merged).
    @Test(.enabled(if: runScenarios)) func pausedHostsShortIsKeptLongIsFailedThenReturns() async throws {
        let lab = try HostLab("pause", hosts: 4)
        defer { lab.teardown() }
        let nodes = try await lab.startAll()
        var streams: [HostEvents] = []
        for node in nodes { streams.append(try await HostEvents.subscribe(node, topics: ["members"])) }

        // Short pause: 40 % of the minimum suspicion timeout, derived from the node's SWIM settings
        // (the simulator runs the same defaults), then a window as long as the longest suspicion
        // the pause may have started (a lone suspecter's, β × the minimum) and two probe periods,
        // in which no `failed` may appear; every stream catches up with its node before the count.
        let swim = SimScenario(nodes: nodes.count, seed: 1, duration: 1).settings
        let shortPause = 0.4 * swim.minSuspicionTimeout
        let window = swim.suspicionBeta * swim.minSuspicionTimeout + 2 * swim.probeInterval
        let short = nodes[3]
        let others = streams.filter { $0.node !== short }
        // Timed on a thread of its own: a `Task.sleep` here wakes late when the shared pool is busy.
        let shortStop = await TestProcesses.pause(short.pid, for: shortPause)
        #expect(shortStop < swim.minSuspicionTimeout, "the short pause lasted \(shortStop) s")
        try await Task.sleep(for: .seconds(window))
        for stream in others { try await stream.catchUp() }
        var shortFailed = 0, shortSuspected = 0
        for stream in others {
            shortFailed += await stream.memberChanges("failed", about: short.member).count + stream.memberChanges("left", about: short.member).count
            shortSuspected += await stream.memberChanges("suspect", about: short.member).count
        }
        #expect(shortFailed == 0, "a host paused for \(shortStop) s was marked failed \(shortFailed) times")
        try await lab.waitForOneView(nodes, within: 30)

        // Long pause: stopped until every other host marked it failed (at most 20 s), then resumed.
        let long = nodes[2]
        let watchers = streams.filter { $0.node !== long }
        let stopped = ContinuousClock.now
        long.pause()
        var detectSeconds = -1.0
        do {
            try await eventually("the others to mark the paused host failed", within: 19, every: .milliseconds(100)) {
                for stream in watchers where await stream.memberChanges("failed", about: long.member).isEmpty { return false }
                return true
            }
            detectSeconds = (ContinuousClock.now - stopped).seconds
        } catch {
            Issue.record("a host paused for 20 s was not marked failed by every other host within 19 s")
        }
        let resumed = ContinuousClock.now
        long.resume()
        var backSeconds = -1.0
        do {
            try await lab.waitForOneView(nodes, within: 60)
            backSeconds = (ContinuousClock.now - resumed).seconds
        } catch {
            var views: [String] = []
            for node in nodes { views.append("\(node.name) sees \((try? await node.aliveMembers().count) ?? -1)") }
            Issue.record("the long-paused host did not come back: \(error): \(views.joined(separator: ", "))\n\(lab.logs)")
        }
        let sameMember = try await long.request("status")["member"]?.stringValue == long.member
        #expect(sameMember, "the resumed host is a different member")
        // How it came back: an `alive` (refutation) or `joined` (re-merge) event after SIGCONT.
        var how: [String: Int] = [:]
        for stream in watchers {
            for change in ["alive", "joined"] {
                how[change, default: 0] += await stream.memberChanges(change, about: long.member).filter { $0.at >= resumed }.count
            }
        }
        var disconnects: [String] = []
        for stream in streams { disconnects += await stream.disconnects.map { "\(stream.node.name): \($0)" } }
        for stream in streams { await stream.stop() }
        await expectNoOverflows(streams)
        let came = how.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")
        report("pause: \(f1(shortStop)) s stop → \(shortFailed) failed (\(shortSuspected) suspect events) in a \(f1(window)) s window; "
            + "long stop → failed everywhere after \(f1(detectSeconds)) s, alive in one view \(f1(backSeconds)) s after SIGCONT"
            + " as the same member (\(came.isEmpty ? "no alive/joined event" : came))"
            + (disconnects.isEmpty ? "" : "; event streams reconnected (caught up): \(disconnects.prefix(4))"))
        #expect(backSeconds >= 0)
    }

    /// An attachment added on A; A is killed (`kill -9`) once the attachment is `replicated`; a
    /// sixth host joins afterwards and receives it, byte for byte, from the others.
    @Test(.enabled(if: runScenarios)) func attachmentOutlivesItsKilledUploaderAndReachesALateHost() async throws {
        let lab = try HostLab("attach", hosts: 6)
        defer { lab.teardown() }
        let nodes = try await lab.startAll(count: 5)
        let size = 24 << 20
        let file = try lab.randomFile("original.bin", bytes: size)
        let uploader = nodes[0]
        let events = try await HostEvents.subscribe(uploader, topics: ["attachments"])
        let added = ContinuousClock.now
        let reply = try await uploader.request("attach.add", ["path": .string(file), "meta": ["location": "hosts"]])
        guard let id = reply["attachment"]?.objectValue?["id"]?.stringValue else {
            Issue.record("attach.add answered without an id: \(reply)")
            return
        }
        do {
            try await eventually("the uploader to report the attachment replicated", within: 120, every: .milliseconds(100)) {
                await !events.events.filter { $0.event["change"]?.stringValue == "replicated" }.isEmpty
            }
        } catch {
            Issue.record("\(error)\n\(lab.logs)")
            return
        }
        await events.stop()
        await expectNoOverflows([events])
        let replicatedSeconds = (ContinuousClock.now - added).seconds
        uploader.kill()
        uploader.waitUntilGone()
        let late = try await lab.start(5, join: [1])
        let joined = ContinuousClock.now
        let out = "\(lab.dir)/late-copy.bin"
        do {
            _ = try await late.request("attach.get", ["id": .string(id), "path": .string(out), "timeout_ms": 180_000])
        } catch {
            var views: [String] = []
            for node in nodes.dropFirst() + [late] {
                let list = try? await node.request("attach.list")["attachments"]?.arrayValue?.first?.objectValue
                views.append("\(node.name): state \(list?["state"]?.stringValue ?? "-") have \(list?["have"]?.intValue ?? -1)")
            }
            Issue.record("the late host could not get the attachment: \(error); \(views.joined(separator: ", "))\n\(lab.logs)")
            return
        }
        let lateSeconds = (ContinuousClock.now - joined).seconds
        let same = FileManager.default.contentsEqual(atPath: file, andPath: out)
        #expect(same, "the late host's copy differs from the original")
        report("attachment 24 MiB: replicated \(f1(replicatedSeconds)) s after add; uploader killed; late 6th host had it "
            + "\(f1(lateSeconds)) s after starting (\(f1(Double(size) / 1_048_576 / max(lateSeconds, 0.001))) MiB/s), identical: \(same)")
    }

    /// The uploader's chunk bodies never leave it (its large TCP packets are dropped), so nobody
    /// holds a chunk when it is killed: every other host reports `unavailable`, and `attach.get`
    /// fails at once with `unavailable` — nothing waits forever.
    @Test(.enabled(if: runScenarios)) func uploaderKilledBeforeAnyChunkLeftMakesTheAttachmentUnavailableFast() async throws {
        let lab = try HostLab("unavail", hosts: 4)
        defer { lab.teardown() }
        let nodes = try await lab.startAll()
        let others = Array(nodes.dropFirst())
        var streams: [HostEvents] = []
        for node in others { streams.append(try await HostEvents.subscribe(node, topics: ["attachments"])) }
        try lab.dropLargeTCP(from: 0, over: 1200)
        let file = try lab.randomFile("stuck.bin", bytes: 4 << 20)
        let reply = try await nodes[0].request("attach.add", ["path": .string(file)])
        guard let id = reply["attachment"]?.objectValue?["id"]?.stringValue else {
            Issue.record("attach.add answered without an id: \(reply)")
            return
        }
        // The journal entry (small) reaches everyone; no chunk does.
        do {
            try await eventually("every other host to list the attachment", within: 60) {
                for node in others where try await node.request("attach.list")["attachments"]?.arrayValue?.isEmpty != false { return false }
                return true
            }
        } catch {
            Issue.record("\(error)\n\(lab.logs)")
            return
        }
        var held = 0
        for node in others { held += Int(try await node.request("attach.list")["attachments"]?.arrayValue?.first?.objectValue?["have"]?.intValue ?? 0) }
        #expect(held == 0, "a chunk left the uploader before it was killed (\(held) held elsewhere); the scenario needs none")
        let killed = ContinuousClock.now
        nodes[0].kill()
        do {
            try await eventually("every other host to report the attachment unavailable", within: 60) {
                for stream in streams where await stream.events.filter({ $0.event["change"]?.stringValue == "unavailable" }).isEmpty { return false }
                return true
            }
        } catch {
            Issue.record("\(error)\n\(lab.logs)")
            return
        }
        let unavailableSeconds = (ContinuousClock.now - killed).seconds
        var slowest = 0.0
        for node in others {
            let asked = ContinuousClock.now
            do {
                _ = try await node.request("attach.get", ["id": .string(id), "path": .string("\(lab.dir)/\(node.name)-stuck.bin"), "timeout_ms": 60_000])
                Issue.record("\(node.name) got an attachment whose only holder was killed")
            } catch let error as ControlError {
                #expect(error.code == .unavailable, "\(node.name): attach.get failed with \(error), not unavailable")
            }
            slowest = max(slowest, (ContinuousClock.now - asked).seconds)
        }
        for stream in streams { await stream.stop() }
        await expectNoOverflows(streams)
        report("uploader killed before any chunk left: unavailable at all 3 others \(f1(unavailableSeconds)) s after the kill; "
            + "attach.get failed with unavailable in ≤ \(String(format: "%.3f", slowest)) s (timeout_ms was 60000)")
        #expect(slowest < 10, "attach.get took \(slowest) s to fail")
    }
}

/// The partition scenarios: a second lane beside `HostScenarios`, serialized within itself, so the
/// host suite's two halves run side by side (each lab has its own namespaces, bridge and subnet).
@Suite("Several hosts: partitions (network namespaces)", .serialized, .timeLimit(.minutes(10)))
struct HostPartitionScenarios {
    /// {A,B} | {C,D,E} for longer than the suspicion timeout, then heal: one view again without
    /// any `join`, and messages sent on each side after the heal reach everyone.
    @Test(.enabled(if: runScenarios)) func partitionHealsIntoOneViewWithoutJoin() async throws {
        let lab = try HostLab("partition", hosts: 5)
        defer { lab.teardown() }
        let nodes = try await lab.startAll()
        var streams: [HostEvents] = []
        for node in nodes { streams.append(try await HostEvents.subscribe(node, topics: ["members", "messages"])) }
        let left = [0, 1], right = [2, 3, 4]
        let cut = ContinuousClock.now
        try lab.partition(left, right)
        // Each side marks the other failed (the cut outlasts the suspicion timeout).
        do {
            try await eventually("each side to mark the other failed", within: 30, every: .milliseconds(100)) {
                for (mine, theirs) in [(left, right), (right, left)] {
                    for i in mine {
                        for j in theirs {
                            let state = try await nodes[i].state(of: nodes[j].member)
                            if state == "alive" || state == "suspect" { return false }
                        }
                    }
                }
                return true
            }
        } catch {
            Issue.record("\(error)\n\(lab.logs)")
            return
        }
        let detectSeconds = (ContinuousClock.now - cut).seconds
        // The cut lasts at least 8 s in all (a fault duration, not a speed assumption).
        let held = Duration.seconds(8) - (ContinuousClock.now - cut)
        if held > .zero { try await Task.sleep(for: held) }
        let cutSeconds = (ContinuousClock.now - cut).seconds
        try lab.heal()
        let healed = ContinuousClock.now
        do {
            try await lab.waitForOneView(nodes, within: 90)
        } catch {
            var views: [String] = []
            for node in nodes { views.append("\(node.name) sees \((try? await node.aliveMembers().count) ?? -1)") }
            Issue.record("\(error): \(views.joined(separator: ", "))\n\(lab.logs)")
            return
        }
        let viewSeconds = (ContinuousClock.now - healed).seconds
        // Messages from each side after the heal.
        let perSide = 20
        let sendStart = ContinuousClock.now
        var texts: Set<String> = []
        for s in [0, 2] {
            let client = try await nodes[s].client()
            for i in 0..<perSide {
                let text = "after-heal-\(nodes[s].name)-\(i)"
                _ = try await client.ask("send", ["text": .string(text)])
                texts.insert(text)
            }
            await client.close()
        }
        let want = texts.count
        do {
            try await eventually("the \(want) post-heal messages at every host", within: 60) {
                for stream in streams {
                    let got = Set(await stream.messages().compactMap { $0["text"]?.stringValue }).intersection(texts)
                    if got.count < want { return false }
                }
                return true
            }
        } catch {
            var counts: [String] = []
            for stream in streams {
                counts.append("\(stream.node.name)=\(Set(await stream.messages().compactMap { $0["text"]?.stringValue }).intersection(texts).count)")
            }
            Issue.record("\(error): \(counts.joined(separator: " "))\n\(lab.logs)")
            return
        }
        let deliverSeconds = (ContinuousClock.now - sendStart).seconds
        let problems = try await deliveryViolations(streams)
        var failedEvents = 0
        for stream in streams { failedEvents += await stream.memberChanges("failed").count }
        for stream in streams { await stream.stop() }
        await expectNoOverflows(streams)
        report("partition {a,b}|{c,d,e}: sides split in \(f1(detectSeconds)) s (\(failedEvents) failed events), cut held \(f1(cutSeconds)) s; "
            + "one view \(f1(viewSeconds)) s after heal with no join; \(want)/\(want) post-heal messages at all 5 within \(f1(deliverSeconds)) s"
            + (problems.isEmpty ? "" : ", \(problems.count) VIOLATIONS"))
        #expect(failedEvents >= left.count * right.count * 2, "each side should have marked the other failed")
        #expect(problems.isEmpty, "\(problems.prefix(10))")
    }

    /// 5 hosts; e is cut off, and while it is, a removes d (issue 21). After the heal, e comes back
    /// on the new epoch without a join (it was on the old epoch's roster: it is handed the change),
    /// sees d removed, and a, b, c, e exchange messages; d is refused by everyone.
    @Test(.enabled(if: runScenarios)) func removalWhileAHostIsPartitionedAwayReachesItAfterTheHeal() async throws {
        let lab = try HostLab("removal", hosts: 5)
        defer { lab.teardown() }
        let nodes = try await lab.startAll()
        var streams: [HostEvents] = []
        for node in nodes { streams.append(try await HostEvents.subscribe(node, topics: ["members", "messages"])) }
        let (remover, removed, away) = (0, 3, 4)
        let stay = [0, 1, 2, 3]
        try lab.partition(stay, [away])
        let cut = ContinuousClock.now
        let removedAt = ContinuousClock.now
        let reply = try await nodes[remover].request("remove", ["member": .string(nodes[removed].member)])
        let removeSeconds = (ContinuousClock.now - removedAt).seconds
        #expect(reply["epoch"]?.intValue == 1)
        // The cut lasts at least 8 s in all (a fault duration, not a speed assumption).
        let held = Duration.seconds(8) - (ContinuousClock.now - cut)
        if held > .zero { try await Task.sleep(for: held) }
        #expect(try await nodes[away].request("status")["epoch"]?.intValue == 0, "the host cut off has not heard of the removal")
        try lab.heal()
        let healed = ContinuousClock.now
        let remaining = [0, 1, 2, 4]
        do {
            try await eventually("the host that was away on epoch 1 with d removed", within: 90) {
                guard try await nodes[away].request("status")["epoch"]?.intValue == 1 else { return false }
                return try await nodes[away].state(of: nodes[removed].member) == "removed"
            }
            try await eventually("one view of the four", within: 90) {
                for i in remaining where try await nodes[i].aliveMembers() != Set(remaining.map { nodes[$0].member }) { return false }
                return true
            }
        } catch {
            Issue.record("\(error)\n\(lab.logs)")
            return
        }
        let backSeconds = (ContinuousClock.now - healed).seconds
        var texts: Set<String> = []
        for s in [0, away] {
            for i in 0..<10 {
                let text = "after-removal-\(nodes[s].name)-\(i)"
                _ = try await nodes[s].request("send", ["text": .string(text)])
                texts.insert(text)
            }
        }
        _ = try? await nodes[removed].request("send", ["text": "from-the-removed-host"])
        try await eventually("the post-heal messages at the four", within: 60) {
            for i in remaining where Set(await streams[i].messages().compactMap { $0["text"]?.stringValue }).intersection(texts).count < texts.count { return false }
            return true
        }
        for i in remaining { #expect(await !streams[i].messages().contains { $0["text"]?.stringValue == "from-the-removed-host" }) }
        #expect(Set(await streams[removed].messages().compactMap { $0["text"]?.stringValue }).intersection(texts).isEmpty, "the removed host receives nothing new")
        let problems = try await deliveryViolations(remaining.map { streams[$0] })
        for stream in streams { await stream.stop() }
        report("removal while e is cut off: remove replied in \(f1(removeSeconds)) s; e on the new epoch, d removed and one view \(f1(backSeconds)) s after the heal, no join"
            + (problems.isEmpty ? "" : ", \(problems.count) VIOLATIONS"))
        #expect(problems.isEmpty, "\(problems.prefix(10))")
    }
}
