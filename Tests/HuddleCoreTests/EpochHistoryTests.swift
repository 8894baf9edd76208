import HuddleCrypto
import Testing
@testable import HuddleCore

/// Issue 21: the pure epoch rules — rotation, removal, refusals, grace and bounds.
@Suite struct EpochHistoryTests {
    @Test func aRekeyHandsEveryMemberTheSameNewKey() throws {
        var g = EpochGroup(3, seed: 1)
        let change = try g.rekey(0, now: 10)
        #expect(g.members[0].epoch == 1 && g.members[0].current?.head == change.hash)
        let receipts = g.deliver([change], to: [1, 2], now: 11)
        let key = try #require(g.members[0].current)
        #expect(receipts[1] == .moved(key) && receipts[2] == .moved(key))
        #expect(key.epoch == 1 && key.fingerprint == g.genesis.fingerprint, "the fingerprint names the session across epochs")
        #expect(key.subkey(.handshakePSK) != g.genesis.subkey(.handshakePSK))
        #expect(g.members[1].handshakeKeys(now: 12).map(\.epoch) == [1, 0], "the current key first, then the previous one within the grace")
        #expect(g.deliver([change], to: [1], now: 12)[1] == .duplicate)
    }

    @Test func theChangeRoundTripsAndEveryDamageIsRefusedOrAnError() throws {
        var g = EpochGroup(3, seed: 2)
        let change = try g.remove(0, [2], now: 1)
        let bytes = change.encoded()
        #expect(try EpochChange.decode(bytes) == change)
        #expect(change.validate() == nil)
        #expect(bytes.count == 1 + 8 + 8 + 32 + 8 + 32 + 8 + 2 + 32 + 2 + 32 + 2 + 2 * (32 + EpochChange.sealedKeyLength) + 64)
        for i in bytes.indices {
            var damaged = bytes
            damaged[i] ^= 0x01
            if let decoded = try? EpochChange.decode(damaged) {
                #expect(decoded.validate() != nil, "flipping byte \(i) went unnoticed")
                let receipt = g.members[1].receive(decoded, now: 2)
                if case .refused = receipt {} else { Issue.record("a damaged change was \(receipt)") }
            }
        }
        for n in 0..<bytes.count { #expect(throws: CoreError.self) { try EpochChange.decode(Array(bytes.prefix(n))) } }
        #expect(throws: CoreError.self) { try EpochChange.decode(bytes + [0]) }
        let grant = EpochGrant(session: g.genesis.sessionID, epoch: 4, head: change.hash, recipient: g.node(1),
                               sealedKey: [UInt8](repeating: 5, count: EpochChange.sealedKeyLength))
        #expect(try EpochGrant.decode(grant.encoded()) == grant)
        for n in 0..<grant.encoded().count { #expect(throws: CoreError.self) { try EpochGrant.decode(Array(grant.encoded().prefix(n))) } }
    }

    /// A roster count the rest of the bytes cannot hold is refused before anything is allocated.
    @Test func aHugeCountIsRefusedBeforeAllocation() throws {
        var g = EpochGroup(2, seed: 3)
        var bytes = try g.rekey(0, now: 1).encoded()
        let rosterCountAt = 1 + 8 + 8 + 32 + 8 + 32 + 8 + 2 + 2 + 32
        bytes[rosterCountAt] = 0xFF
        bytes[rosterCountAt + 1] = 0xFF
        #expect(throws: CoreError.self) { try EpochChange.decode(bytes) }
        let removedCountAt = 1 + 8 + 8 + 32 + 8 + 32 + 8
        var other = try g.rekey(0, now: 2).encoded()
        other[removedCountAt] = 0xFF
        #expect(throws: CoreError.self) { try EpochChange.decode(other) }
    }

    @Test func aRemovedMemberIsNotHandedTheKeyAndIsRefusedWithEveryKeyItEverHad() throws {
        var g = EpochGroup(4, seed: 4)
        let first = try g.rekey(0, now: 1)
        g.deliver([first], to: [1, 2, 3], now: 1)
        let heldByThree = g.members[3].handshakeKeys(now: 1)
        #expect(heldByThree.map(\.epoch) == [1, 0])
        let removal = try g.remove(1, [3], now: 2)
        #expect(!removal.roster.contains(g.node(3)) && removal.removed == [g.node(3)])
        let receipts = g.deliver([removal], to: [0, 2, 3], now: 3)
        #expect(receipts[3] == .removed(by: g.node(1)))
        #expect(g.members[3].current == nil && g.members[3].isRemoved)
        if case .moved = receipts[0] {} else { Issue.record("member 0 did not move: \(String(describing: receipts[0]))") }
        let later = try g.rekey(2, now: 4)
        g.deliver([later], to: [0, 1], now: 4)
        // Every key member 3 ever held, at every remaining member: refused as removed.
        for i in 0..<3 {
            for key in heldByThree + [g.genesis] {
                #expect(g.members[i].admission(of: g.node(3), holding: key.head, now: 5) == .refused(.removedNode))
                #expect(g.members[i].handover(to: g.node(3), holding: key.head, now: 5, using: &g.rng) == nil)
            }
        }
        // Its changes: on the epoch it still holds (its maker is removed there) and a fork from an
        // older one (it loses to the branch that removes it).
        var rng = SWIMRandom(seed: 9)
        var stale = EpochHistory(key: heldByThree[0], identity: g.members[3].identity, local: MemberID(raw: 4))
        let onTop = try stale.rekey(members: g.nodes, now: 6, using: &rng)
        let headBefore = g.members[0].head
        #expect(g.members[0].receive(onTop, now: 6) == .recorded, "a sibling of its removal, made by the removed, never wins")
        #expect(g.members[0].head == headBefore)
        var forked = EpochHistory(key: g.genesis, identity: g.members[3].identity, local: MemberID(raw: 4))
        let fork = try forked.rekey(members: g.nodes, now: 6, using: &rng)
        #expect(g.members[0].receive(fork, now: 6) == .recorded, "a removed maker's fork never wins")
        #expect(g.members[0].head == headBefore)
    }

    @Test func aChangeWhoseMakerWasRemovedBeforeItIsRefused() throws {
        var g = EpochGroup(3, seed: 5)
        let removal = try g.remove(0, [2], now: 1)
        g.deliver([removal], to: [1, 2], now: 1)
        // Member 2 signs a change on top of the epoch that removed it (it cannot open its key, but it can sign).
        let change = try EpochChange.make(session: g.genesis.sessionID, epoch: 2, parent: removal.hash, maker: MemberID(raw: 3),
                                          identity: g.members[2].identity, removed: [], roster: [g.node(0), g.node(2)],
                                          key: [UInt8](repeating: 1, count: 32), sealSeed: [UInt8](repeating: 2, count: 32))
        #expect(change.validate() == nil)
        #expect(g.members[0].receive(change, now: 3) == .refused(.epochMakerRemoved))
        // And one that hands the key back to a removed node key, by a member in good standing.
        let readd = try EpochChange.make(session: g.genesis.sessionID, epoch: 2, parent: removal.hash, maker: MemberID(raw: 2),
                                         identity: g.members[1].identity, removed: [], roster: [g.node(1), g.node(2)],
                                         key: [UInt8](repeating: 1, count: 32), sealSeed: [UInt8](repeating: 2, count: 32))
        #expect(g.members[0].receive(readd, now: 3) == .refused(.epochReaddsRemoved))
    }

    @Test func aForgedOrForeignChangeIsRefused() throws {
        var g = EpochGroup(2, seed: 6)
        var change = try g.rekey(0, now: 1)
        var forged = change
        forged.removed = [g.node(1)]
        forged.recipients.removeAll { $0.node == g.node(1) }
        #expect(g.members[1].receive(forged, now: 1) == .refused(.epochBadSignature))
        var other = EpochGroup(2, seed: 7)
        #expect(other.members[1].receive(change, now: 1) == .refused(.epochOtherSession))
        change.epoch = 5
        change.signature = g.members[0].identity.sign(change.signedBytes())
        #expect(g.members[1].receive(change, now: 1) == .refused(.epochMalformed), "epoch is not the parent's plus one")
    }

    @Test func onlyAdminsMakeChangesWhenAdminsAreSet() throws {
        var g = EpochGroup(3, seed: 8, admins: [0])
        #expect(throws: CoreError.notAdmin) { try g.rekey(1, now: 1) }
        // Member 1 signs a change on the session's genesis anyway (a hostile member, our own code).
        let byNonAdmin = try EpochChange.make(session: g.genesis.sessionID, epoch: 1, parent: g.genesis.head, maker: MemberID(raw: 2),
                                              identity: g.members[1].identity, removed: [], roster: g.nodes, admins: g.genesis.admins,
                                              key: [UInt8](repeating: 1, count: 32), sealSeed: [UInt8](repeating: 2, count: 32))
        #expect(g.members[2].receive(byNonAdmin, now: 1) == .refused(.epochNotAdmin))
        let byAdmin = try g.remove(0, [1], now: 2)
        #expect(g.deliver([byAdmin], to: [2], now: 2)[2] == .moved(g.members[0].current!))
    }

    /// The same maker signing two changes on one parent: every member follows the lower hash, in any
    /// order, holds both as the evidence, and counts the maker removed (by itself) — its removal is
    /// then re-issued, and the session moves on without it.
    @Test func twoChangesByOneMakerOnOneParentLeaveOneAnswer() throws {
        var g = EpochGroup(3, seed: 10)
        var twin = g.members[0]
        let a = try g.rekey(0, now: 1)
        let b = try twin.rekey(members: g.nodes, now: 1, using: &g.rng)
        let (low, high) = bytesPrecede(a.hash, b.hash) ? (a, b) : (b, a)
        g.deliver([low, high], to: [1], now: 2)
        g.deliver([high, low], to: [2], now: 2)
        #expect(g.members[1].head == low.hash && g.members[2].head == low.hash)
        #expect(g.members[1].receive(high, now: 3) == .duplicate)
        #expect(g.members[1].current == g.members[2].current)
        for i in [1, 2] {
            #expect(g.members[i].equivocators == [g.node(0)] && g.members[i].removedNodes[g.node(0)] == g.node(0))
            let evidence = try #require(g.members[i].equivocations.first)
            #expect(Set([evidence.first.hash, evidence.second.hash]) == Set([low.hash, high.hash]))
            #expect(g.members[i].pendingRemovals == [g.node(0)], "the equivocator is on the head's roster: its removal is due")
        }
        // Member 0's own history holds only its first change: handed the second, it learns it equivocated (is removed).
        #expect(g.members[0].receive(b, now: 3) == .removed(by: g.node(0)))
        // A third change on the same parent is kept only below the two kept, which it then replaces.
        var thirdMaker = EpochHistory(key: g.genesis, identity: g.members[0].identity, local: g.members[0].local)
        let third = try thirdMaker.rekey(members: g.nodes, now: 4, using: &g.rng)
        let receipt = g.members[1].receive(third, now: 4)
        if bytesPrecede(third.hash, high.hash) {
            let thirdKey = try #require(third.openKey(with: g.members[1].identity))
            #expect(receipt == .recorded || receipt == .moved(thirdKey))
            #expect(g.members[1].changes.filter { $0.parent == g.genesis.head }.count == 2)
        } else {
            #expect(receipt == .refused(.epochEquivocation))
        }
    }

    @Test func aChangeWaitsForItsParentAndWaitingIsBounded() throws {
        // A flood by one maker at one change a second: the rate is not what this test is about.
        var settings = EpochSettings()
        settings.changeInterval = 0
        var g = EpochGroup(3, seed: 11, settings: settings)
        let first = try g.rekey(0, now: 1)
        let second = try g.rekey(0, now: 2)
        #expect(g.members[1].receive(second, now: 3) == .waiting)
        #expect(g.members[1].receive(second, now: 3) == .duplicate)
        #expect(g.members[1].receive(first, now: 3) == .moved(g.members[0].current!), "the parent releases the waiting child")
        #expect(g.members[1].epoch == 2)
        // A flood of orphans keeps at most maxWaiting.
        var source = g.members[0]
        var orphans: [EpochChange] = []
        for t in 0..<60 { orphans.append(try source.rekey(members: g.nodes, now: Double(10 + t), using: &g.rng)) }
        for o in orphans.dropFirst() { _ = g.members[2].receive(o, now: 20) }
        #expect(g.members[2].waiting.count == g.members[2].settings.maxWaiting)
    }

    @Test func historyIsBoundedByMaxChanges() throws {
        var settings = EpochSettings()
        settings.maxChanges = 16
        var g = EpochGroup(2, seed: 12, settings: settings)
        for t in 0..<100 {
            let c = try g.rekey(t % 2, now: Double(t))
            g.deliver([c], to: [1 - t % 2], now: Double(t))
        }
        #expect(g.members[0].epoch == 100 && g.members[1].epoch == 100)
        #expect(g.members[0].entries.count <= 17 && g.members[1].entries.count <= 17)
        #expect(g.members[0].current == g.members[1].current)
        #expect(g.members[0].handshakeKeys(now: 100).count <= 17)
    }

    /// Past the grace an old key opens nothing, and a change on top of an epoch that ended longer
    /// ago is stale.
    @Test func theGraceBoundsOldKeysAndLateForks() throws {
        var settings = EpochSettings()
        settings.grace = 100
        var g = EpochGroup(3, seed: 13, settings: settings)
        let first = try g.rekey(0, now: 0)
        g.deliver([first], to: [1, 2], now: 0)
        #expect(g.members[1].admission(of: g.node(2), holding: g.genesis.head, now: 50) == .behind)
        #expect(g.members[1].admission(of: g.node(2), holding: g.genesis.head, now: 101) == .refused(.epochOutsideGrace))
        var late = EpochHistory(key: g.genesis, identity: g.members[2].identity, local: MemberID(raw: 3), settings: settings)
        let fork = try late.rekey(members: g.nodes, now: 150, using: &g.rng)
        #expect(g.members[1].receive(fork, now: 150) == .refused(.epochStale))
        let second = try g.rekey(0, now: 200)
        _ = g.members[1].receive(second, now: 200)
        #expect(g.members[1].handshakeKeys(now: 200).map(\.epoch) == [2, 1], "epoch 0's key is gone")
    }

    /// A holder of an old key that no roster names (a leaked key file with a fresh identity) is refused.
    @Test func anOldKeyWithoutARosterEntryIsRefused() throws {
        var g = EpochGroup(3, seed: 14)
        let first = try g.rekey(0, now: 1, members: [g.node(0), g.node(1)])
        g.deliver([first], to: [1], now: 1)
        let stranger = Identity(seed: [UInt8](repeating: 99, count: 32))
        #expect(g.members[1].admission(of: stranger.publicKey, holding: g.genesis.head, now: 2) == .refused(.notOnRoster))
        #expect(g.members[1].admission(of: stranger.publicKey, holding: first.hash, now: 2) == .current,
                "whoever holds the current key is in, as today")
    }
}
