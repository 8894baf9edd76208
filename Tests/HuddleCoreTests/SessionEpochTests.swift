import HuddleCrypto
import Testing
@testable import HuddleCore

/// Pure tests of how `SessionCore` joins the epoch rules to links, membership and datagrams
/// (issue 21), with injected time and seeded randomness. Three cores know each other; link
/// messages are passed by hand, as the shell would.
private struct Trio {
    var cores: [SessionCore]
    let infos: [MemberInfo]
    let genesis: SessionKey

    /// `knows[i]`: the members core `i` has in its member table (all three when nil).
    init(settings: EpochSettings = EpochSettings(), knows: [[Int]]? = nil, admins: [[UInt8]] = []) {
        genesis = (try? SessionKey(bytes: [UInt8](repeating: 42, count: 32), admins: admins)) ?? SessionKey.generate()
        var infos: [MemberInfo] = []
        var cores: [SessionCore] = []
        for raw in UInt64(1)...3 {
            let identity = Identity(seed: [UInt8](repeating: UInt8(raw), count: 32))
            let info = MemberInfo(id: MemberID(raw: raw), node: identity.publicKey, name: "m\(raw)", addr: testAddr("m\(raw)")).signed(by: identity)
            infos.append(info)
            cores.append(SessionCore(local: info, identity: identity, joining: false, swimSeed: raw, journalSeed: raw,
                                     sessionKey: genesis, epochSettings: settings, epochRandom: SWIMRandom(seed: raw)))
        }
        self.infos = infos
        self.cores = cores
        for i in 0..<3 {
            let known = knows.map { $0[i].map { infos[$0] } } ?? infos
            _ = self.cores[i].receivePushPull(SWIMPushPull(join: false, members: known), from: testAddr("m1"), now: 0)
        }
    }

    /// Links `a` and `b` with the key of epoch `keyHead` (nil: current) and returns what each sent after its hello.
    mutating func link(_ a: Int, _ b: Int, keyHead: [UInt8]? = nil, now: Double) throws -> [[SessionEffect]] {
        try cores[a].admitLink(infos[b], keyHead: keyHead, now: now)
        try cores[b].admitLink(infos[a], keyHead: keyHead, now: now)
        return [(a, b), (b, a)].map { x, y in
            _ = cores[x].linkUp(infos[y].id)
            return cores[x].epochLinkUp(infos[y].id, now: now)
        }
    }

    /// Delivers every link message in `effects` from `from` (to one peer, or to every linked one), until quiet.
    mutating func run(_ effects: [SessionEffect], from: Int, now: Double) {
        var queue = [(from, effects)]
        while let (sender, batch) = queue.first {
            queue.removeFirst()
            for effect in batch {
                var targets: [(Int, LinkMessage)] = []
                switch effect {
                case let .sendLink(peer, message): if let j = index(peer) { targets = [(j, message)] }
                case let .sendToLinks(message): targets = cores[sender].planner.linked.sorted().compactMap { index($0) }.map { ($0, message) }
                default: break
                }
                for (j, message) in targets where cores[j].planner.linked.contains(infos[sender].id) {
                    switch message {
                    case .epochChanges, .epochGrant, .epochHead:
                        queue.append((j, cores[j].receiveLink(message, from: infos[sender].id, addr: infos[sender].addr, now: now)))
                    default: break
                    }
                }
            }
        }
    }

    func index(_ id: MemberID) -> Int? { infos.firstIndex { $0.id == id } }
}

private func moved(_ effects: [SessionEffect]) -> [UInt64] { effects.compactMap { if case let .epochMoved(k) = $0 { k.epoch } else { nil } } }

@Test func aRemovalReachesEveryLinkedMemberAndCutsTheRemovedOneOff() throws {
    var t = Trio()
    for (a, b) in [(0, 1), (0, 2), (1, 2)] { _ = try t.link(a, b, now: 1) }
    let (change, effects) = try t.cores[0].remove(nodes: [t.infos[2].node], now: 2)
    #expect(change.epoch == 1 && moved(effects) == [1])
    #expect(effects.contains(.closeLink(t.infos[2].id)))
    #expect(effects.contains(.memberRemoved(t.cores[0].swim.members[t.infos[2].id]!, by: t.infos[0].id)))
    t.run(effects, from: 0, now: 2)
    #expect(t.cores[1].epoch == 1 && t.cores[1].epochs.current != nil)
    #expect(t.cores[2].epochs.isRemoved && t.cores[2].epochs.current == nil, "the removed member learns it, and holds no new key")
    for i in 0..<2 { #expect(t.cores[i].live == [t.infos[0].id, t.infos[1].id]) }
    #expect(t.cores[2].handshakeKeys(now: 3).isEmpty && t.cores[2].tick(now: 3).isEmpty, "a removed member decides nothing more")
    // Its node key is refused on a link, with the old key or any other, and counted.
    #expect(throws: CoreError.linkRefusedByEpoch(.removedNode)) { try t.cores[1].admitLink(t.infos[2], keyHead: t.genesis.head, now: 3) }
    #expect(t.cores[1].refusals[.removedNode] == 1)
    // Nothing is sent to the removed member's address any more, not even a probe under the new
    // key, nor a re-merge push-pull once it is failed (2 minutes: several re-merge rounds).
    var sentThere = 0, dialledThere = 0
    for step in 30...1200 {
        for effect in t.cores[0].tick(now: Double(step) / 10) {
            if case let .sendDatagram(_, addr, _) = effect, addr == t.infos[2].addr { sentThere += 1 }
            // A push-pull to an unlinked address is a dial that carries it (`.dial(_, pushPull:)`).
            if case let .dial(addr, _) = effect, addr == t.infos[2].addr { dialledThere += 1 }
        }
    }
    #expect(sentThere == 0, "\(sentThere) datagrams to the removed member")
    #expect(dialledThere == 0, "\(dialledThere) dials (push-pulls) to the removed member's address")
}

@Test func aMemberBehindIsHandedTheChangesWhenItLinksWithTheOldKey() throws {
    var t = Trio()
    _ = try t.link(0, 1, now: 1)
    // Member 2 is offline (no link) while 0 rotates twice.
    let (_, first) = try t.cores[0].rekey(now: 2)
    t.run(first, from: 0, now: 2)
    let (_, second) = try t.cores[1].rekey(now: 3)
    t.run(second, from: 1, now: 3)
    #expect(t.cores[0].epoch == 2 && t.cores[1].epoch == 2 && t.cores[2].epoch == 0)
    // It comes back with the epoch-0 key: the handshake tries older keys within the grace.
    #expect(t.cores[0].handshakeKeys(now: 4).map(\.head).contains(t.genesis.head))
    let after = try t.link(0, 2, keyHead: t.genesis.head, now: 4)
    t.run(after[0], from: 0, now: 4)
    #expect(t.cores[2].epoch == 2 && t.cores[2].epochs.current == t.cores[0].epochs.current, "handed both changes, it holds the current key")
}

/// A member that repeats its old head gets the hand-over (changes and grant) once per
/// `handoverInterval`, not once per message: a thousand heads in a second make one hand-over.
@Test func aRepeatedHeadIsHandedOverOncePerInterval() throws {
    var t = Trio()
    _ = try t.link(0, 1, now: 1)
    let (_, first) = try t.cores[0].rekey(now: 2)
    t.run(first, from: 0, now: 2)
    _ = try t.link(0, 2, keyHead: t.genesis.head, now: 4)
    func handedOver(_ effects: [SessionEffect]) -> Int {
        effects.filter { if case .sendLink(_, .epochGrant) = $0 { true } else if case .sendLink(_, .epochChanges) = $0 { true } else { false } }.count
    }
    let head = LinkMessage.epochHead(epoch: 0, head: t.genesis.head, holdsKey: true)
    let once = handedOver(t.cores[0].receiveLink(head, from: t.infos[2].id, addr: t.infos[2].addr, now: 5))
    #expect(once > 0, "a member behind is handed the changes")
    var more = 0
    for k in 1..<1000 { more += handedOver(t.cores[0].receiveLink(head, from: t.infos[2].id, addr: t.infos[2].addr, now: 5 + Double(k) / 1000)) }
    #expect(more == 0, "hand-over messages for 999 more heads within a second: \(more)")
    let later = handedOver(t.cores[0].receiveLink(head, from: t.infos[2].id, addr: t.infos[2].addr, now: 5 + SessionCore.handoverInterval + 0.1))
    #expect(later == once, "the same head after the interval is handed over again")
}

/// Heads that differ each time (a member names any bytes it likes) get no more than a repeated
/// one: one hand-over per interval. The last head of an interval is answered when it ends (in
/// `tick`), so an honest member whose head moved within the interval is not left behind.
@Test func headsThatDifferEachTimeAreHandedOverOncePerIntervalAndTheLastOneLater() throws {
    var t = Trio()
    _ = try t.link(0, 1, now: 1)
    let (_, first) = try t.cores[0].rekey(now: 2)
    t.run(first, from: 0, now: 2)
    _ = try t.link(0, 2, keyHead: t.genesis.head, now: 4)
    func grants(_ effects: [SessionEffect]) -> Int {
        effects.filter { if case .sendLink(_, .epochGrant) = $0 { true } else if case .sendLink(_, .epochChanges) = $0 { true } else { false } }.count
    }
    let peer = t.infos[2]
    var rng = SWIMRandom(seed: 9)
    func randomHead() -> LinkMessage {
        .epochHead(epoch: 0, head: (0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) }, holdsKey: false)
    }
    let once = grants(t.cores[0].receiveLink(randomHead(), from: peer.id, addr: peer.addr, now: 5))
    #expect(once > 0, "the first head is handed the changes")
    var more = 0
    for k in 1..<1000 { more += grants(t.cores[0].receiveLink(randomHead(), from: peer.id, addr: peer.addr, now: 5 + Double(k) / 1000)) }
    #expect(more == 0, "hand-over messages for 999 more heads, each different, within a second: \(more)")
    #expect(t.cores[0].nextDeadline <= 5 + SessionCore.handoverInterval, "the waiting head's hand-over is a deadline")
    let due = grants(t.cores[0].tick(now: 5 + SessionCore.handoverInterval))
    #expect(due == once, "the last head of the interval is handed over when it ends")
    #expect(grants(t.cores[0].tick(now: 5 + 2 * SessionCore.handoverInterval + 0.1)) == 0, "and only once")
}

@Test func aStrangerWithAnOldKeyIsRefusedAndSoIsANonAdmin() throws {
    let admin = Identity(seed: [UInt8](repeating: 1, count: 32)).publicKey
    var t = Trio(admins: [admin])
    _ = try t.link(0, 1, now: 1)
    #expect(throws: CoreError.notAdmin) { _ = try t.cores[1].rekey(now: 2) }
    #expect(t.cores[1].refusals[.epochNotAdmin] == 1)
    let (_, effects) = try t.cores[0].rekey(now: 2)
    t.run(effects, from: 0, now: 2)
    // A node key the maker never knew holds only the epoch-0 key: not on any roster, refused.
    let stranger = Identity(seed: [UInt8](repeating: 9, count: 32))
    let info = MemberInfo(id: MemberID(raw: 9), node: stranger.publicKey, name: "x", addr: testAddr("x")).signed(by: stranger)
    #expect(throws: CoreError.linkRefusedByEpoch(.notOnRoster)) { try t.cores[0].admitLink(info, keyHead: t.genesis.head, now: 3) }
    #expect(t.cores[0].refusals[.notOnRoster] == 1)
}

@Test func aRoutineRotationComesDueAndTheNextOneIsScheduledFromTheMove() throws {
    var t = Trio()
    _ = try t.link(0, 1, now: 1)
    t.cores[0].rotate(every: 10, now: 1)
    #expect(t.cores[0].rekeyAt >= 11 && t.cores[0].rekeyAt <= 13.5 && t.cores[0].nextDeadline <= t.cores[0].rekeyAt)
    #expect(moved(t.cores[0].tick(now: 5)).isEmpty, "not due yet")
    let effects = t.cores[0].tick(now: 14)
    #expect(moved(effects) == [1])
    t.run(effects, from: 0, now: 14)
    #expect(t.cores[1].epoch == 1, "member 1 (no --rekey-every) follows")
    #expect(moved(t.cores[0].tick(now: 15)).isEmpty && t.cores[0].rekeyAt >= 24, "the next rotation is a period after this one")
}

/// A joiner that a concurrent rotation left out: member 2 linked to member 1 on epoch 0, while
/// member 0, which does not know it yet, rotated. Member 1 let it in with epoch 0's key as a current
/// member, so it hands it epoch 1's key: the joiner is not stranded, and makes no counter-change
/// (which would remove the honest maker after the re-issue delay). Before: member 1 refused to hand
/// it anything (not on any roster), and at epoch 0 the joiner counted itself locked out.
@Test func aJoinerThatAConcurrentRotationLeftOutIsHandedTheKeyByTheMemberThatLetItIn() throws {
    var t = Trio(knows: [[0, 1], [0, 1, 2], [1, 2]])
    _ = try t.link(1, 2, now: 1)
    _ = try t.link(0, 1, now: 1)
    let (change, effects) = try t.cores[0].rekey(now: 2)
    #expect(!change.roster.contains(t.infos[2].node), "the maker did not know the joiner")
    t.run(effects, from: 0, now: 2)
    #expect(t.cores[1].epoch == 1 && t.cores[2].epoch == 1)
    let key = try #require(t.cores[1].epochs.current)
    #expect(t.cores[2].epochs.current == key, "the joiner is handed the new key")
    #expect(t.cores[2].epochs.counterDeadline == nil, "granted, it makes no counter-change")
    #expect(!t.cores[2].tick(now: 100).contains { if case .epochMoved = $0 { true } else { false } }, "no counter-change")
    #expect(t.cores[2].epochs.head == change.hash)
}

/// A locked-out member's `remove` of someone the capture did not hand a key is made on the epoch
/// before and loses to the capture: it is still sent (its removal counts everywhere) and the op
/// succeeds. Before: the change was kept here, never sent, and the op failed with "not handed".
@Test func aLockedOutRemovalThatLosesTheForkChoiceIsStillSent() throws {
    var t = Trio()
    for (a, b) in [(0, 1), (0, 2), (1, 2)] { _ = try t.link(a, b, now: 1) }
    let hostile = Identity(seed: [UInt8](repeating: 3, count: 32))
    var rng = SWIMRandom(seed: 9)
    var capture: EpochChange?
    for _ in 0..<2000 {
        let c = try EpochChange.make(session: t.genesis.sessionID, epoch: 1, parent: t.genesis.head, maker: t.infos[2].id, identity: hostile,
                                     removed: [], roster: [hostile.publicKey], key: randomBytes(32, &rng), sealSeed: randomBytes(32, &rng))
        if c.hash[0] < 2 { capture = c; break }
    }
    let forged = try #require(capture)
    for i in 0..<2 { t.run(t.cores[i].receiveLink(.epochChanges([forged]), from: t.infos[2].id, addr: t.infos[2].addr, now: 2), from: i, now: 2) }
    #expect(t.cores[0].epochs.lockout?.maker == hostile.publicKey)
    let (removal, effects) = try t.cores[0].remove(nodes: [t.infos[1].node], now: 3)
    #expect(removal.parent == t.genesis.head && t.cores[0].epochs.head == forged.hash, "the removal lost to the lower capture")
    #expect(effects.contains(.sendToLinks(.epochChanges([removal]))), "the change just made is sent")
    #expect(t.cores[0].epochs.removedNodes[t.infos[1].node] != nil)
}

/// The evidence against an equivocator goes to every link that comes up later too: a member that
/// was not linked when it was found holds it as well, and excludes the equivocator by itself.
/// Before: it went only to the links up at that moment.
@Test func aNewLinkIsHandedTheEvidenceAgainstEveryEquivocator() throws {
    var t = Trio()
    _ = try t.link(0, 2, now: 1)
    let hostile = Identity(seed: [UInt8](repeating: 3, count: 32))
    var rng = SWIMRandom(seed: 11)
    let twins = try (0..<2).map { _ in
        try EpochChange.make(session: t.genesis.sessionID, epoch: 1, parent: t.genesis.head, maker: t.infos[2].id, identity: hostile,
                             removed: [], roster: t.infos.map(\.node), key: randomBytes(32, &rng), sealSeed: randomBytes(32, &rng))
    }
    for twin in twins { _ = t.cores[0].receiveLink(.epochChanges([twin]), from: t.infos[2].id, addr: t.infos[2].addr, now: 2) }
    #expect(t.cores[0].epochs.equivocators == [hostile.publicKey])
    let up = try t.link(0, 1, now: 3)
    t.run(up[0], from: 0, now: 3)
    #expect(t.cores[1].epochs.equivocators == [hostile.publicKey], "the member linked later holds the evidence")
    #expect(t.cores[1].epochs.removedNodes[hostile.publicKey] != nil)
}

/// A removed member decides nothing more (`tick` returns nothing), so nothing is ever due: before,
/// its deadline stayed where its last tick left it, in the past, and its shell woke it every
/// `minimumTickGap` (200 times a second) for good.
@Test func aRemovedMemberIsNeverDue() throws {
    var t = Trio()
    for (a, b) in [(0, 1), (0, 2), (1, 2)] { _ = try t.link(a, b, now: 1) }
    _ = t.cores[1].tick(now: 2)
    #expect(t.cores[1].nextDeadline < .infinity)
    let (_, effects) = try t.cores[0].remove(nodes: [t.infos[1].node], now: 3)
    t.run(effects, from: 0, now: 3)
    #expect(t.cores[1].epochs.isRemoved)
    #expect(t.cores[1].tick(now: 4).isEmpty)
    #expect(t.cores[1].nextDeadline == .infinity)
}
