import HuddleCrypto
@testable import HuddleCore

/// Members of one test session, each running its own `EpochHistory`, with deterministic identities
/// and keys (seeded), and helpers to pass changes between them.
struct EpochGroup {
    var members: [EpochHistory]
    var rng: SWIMRandom
    let genesis: SessionKey

    /// `admins`: the members whose node keys are the session's admins (bound into its key).
    init(_ count: Int, seed: UInt64, settings: EpochSettings = EpochSettings(), admins: [Int] = []) {
        rng = SWIMRandom(seed: seed)
        var keyRNG = SWIMRandom(seed: seed ^ 0x5EED)
        let identities = (0..<count).map { Self.identity($0, seed: seed) }
        let adminKeys = admins.map { identities[$0].publicKey }
        let genesis = (try? SessionKey(bytes: randomBytes(32, &keyRNG), admins: adminKeys)) ?? SessionKey.generate()
        self.genesis = genesis
        members = (0..<count).map { i in
            EpochHistory(key: genesis, identity: identities[i], local: MemberID(raw: UInt64(i + 1)), settings: settings)
        }
    }

    /// The identity of member `i` of a group made with `seed`.
    static func identity(_ i: Int, seed: UInt64) -> Identity {
        var seedBytes = [UInt8](repeating: UInt8(truncatingIfNeeded: i + 1), count: 32)
        seedBytes[31] = UInt8(truncatingIfNeeded: seed)
        return Identity(seed: seedBytes)
    }

    func node(_ i: Int) -> [UInt8] { members[i].nodeKey }
    var nodes: [[UInt8]] { members.map(\.nodeKey) }

    /// Every node key member `i` does not know as removed (what its membership view would name).
    func view(_ i: Int) -> [[UInt8]] { nodes.filter { members[i].removedNodes[$0] == nil } }

    mutating func rekey(_ i: Int, now: Double, members: [[UInt8]]? = nil) throws -> EpochChange {
        try self.members[i].rekey(members: members ?? view(i), now: now, using: &rng)
    }

    mutating func remove(_ i: Int, _ targets: [Int], now: Double, members: [[UInt8]]? = nil) throws -> EpochChange {
        try self.members[i].remove(targets.map(node), members: members ?? view(i), now: now, using: &rng)
    }

    /// Delivers `changes` to each member in `to` (in the order given).
    @discardableResult
    mutating func deliver(_ changes: [EpochChange], to: [Int], now: Double) -> [Int: EpochReceipt] {
        var last: [Int: EpochReceipt] = [:]
        for i in to { for c in changes { last[i] = members[i].receive(c, now: now) } }
        return last
    }

    /// Anti-entropy until nothing changes, among `among`: every member hands every other all the
    /// changes it keeps; due removals are re-issued (first by the designated member; time moves
    /// past the re-issue delay only when a round changed nothing); stranded members are handed over.
    mutating func converge(among: [Int]? = nil, now start: Double) -> Double {
        let group = among ?? Array(members.indices)
        var now = start
        for _ in 0..<40 {
            var moved = false
            for i in group {
                let known = members[i].changes
                for j in group where j != i {
                    for c in known {
                        switch members[j].receive(c, now: now) {
                        case .duplicate, .refused: break
                        default: moved = true
                        }
                    }
                }
            }
            for i in group {
                if let c = members[i].reissue(members: view(i), now: now, using: &rng) {
                    moved = true
                    deliver([c], to: group.filter { $0 != i }, now: now)
                }
            }
            handOverToTheStranded(among: group, now: now)
            if !moved {
                guard group.contains(where: { members[$0].reissueDeadline != nil }) else { break }
                now += members[group[0]].settings.reissueDelay + 1
            }
        }
        return now
    }

    /// A member that is not handed the current key links to a member that holds it with the newest
    /// key both hold, and is handed over (as the link handshake will do).
    mutating func handOverToTheStranded(among group: [Int], now: Double) {
        for i in group where members[i].current == nil && !members[i].isRemoved {
            guard let j = group.first(where: { members[$0].current != nil && !members[$0].isRemoved }) else { return }
            let mine = members[i].handshakeKeys(now: now).map(\.head)
            let theirs = Set(members[j].handshakeKeys(now: now).map(\.head))
            guard let shared = mine.first(where: theirs.contains),
                  let handover = members[j].handover(to: node(i), holding: shared, now: now, using: &rng) else { continue }
            _ = members[i].receive(handover, now: now)
        }
    }
}
