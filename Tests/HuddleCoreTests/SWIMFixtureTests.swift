import Testing
@testable import HuddleCore

/// Shared fixtures for the SWIM tests (plus a smoke test so the file stands on its own).
func swimInfo(_ n: UInt64) -> MemberInfo {
    MemberInfo(id: MemberID(raw: n), node: [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: 32),
               name: "m\(n)", addr: "10.0.0.\(n):7946")
}

func swimID(_ n: UInt64) -> MemberID { MemberID(raw: n) }

/// Member `n` that learned `others` as alive by a push-pull at time 0.
func swimInstance(_ n: UInt64 = 1, knowing others: [UInt64], settings: SWIMSettings = .lan, seed: UInt64 = 7) -> SWIMInstance {
    var s = SWIMInstance(local: swimInfo(n), settings: settings, seed: seed, signer: UncheckedMembershipSigner())
    _ = s.receivePushPull(others.map(swimInfo), join: true, from: testAddr("seed"), now: 0)
    return s
}

extension Array where Element == SWIMEffect {
    var sent: [(message: SWIMMessage, to: String)] {
        compactMap { if case let .send(m, to) = $0 { (m, to) } else { nil } }
    }
    var emitted: [(change: MemberChange, info: MemberInfo)] {
        compactMap { if case let .emit(c, i) = $0 { (c, i) } else { nil } }
    }
    func emitted(about n: UInt64) -> [MemberChange] { emitted.filter { $0.info.id == swimID(n) }.map(\.change) }
    var pushPulls: [String] {
        compactMap { if case let .pushPull(to, _, _) = $0 { to } else { nil } }
    }
    var pings: [(seq: UInt32, target: MemberID, to: String)] {
        sent.compactMap { if case let .ping(seq, target) = $0.message.kind { (seq, target, $0.to) } else { nil } }
    }
}

/// A gossip-only message from member `from` carrying `updates`.
func swimGossip(from: UInt64, _ updates: [SWIMGossip]) -> SWIMMessage {
    SWIMMessage(sender: swimID(from), kind: .gossip, gossip: updates)
}

@Test func swimFixtureLearnsPushPullMembers() {
    let s = swimInstance(knowing: [2, 3, 4])
    #expect(s.members.count == 4)
    #expect(s.liveCount == 4)
    #expect(s.members[swimID(3)]?.state == .alive)
}
