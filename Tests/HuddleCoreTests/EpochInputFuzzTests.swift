import Foundation
import HuddleCrypto
import PropertyBased
import HuddleTestSupport
import Testing
@testable import HuddleCore

/// Issue 21: a property-based fuzzer over the epoch inputs a peer can send — epoch changes and
/// grants, made valid, re-encoded with extreme numbers and counts, damaged (bit flips, truncation,
/// random tails, bytes alone) — through the decoders and into an `EpochHistory`, whose admission,
/// handover and re-issue then run. A trap ends the process, so passing means no input trapped.
/// `make test` runs 2,000 inputs (each one verifies a signature); `make fuzz` 1,000,000 (`FuzzRun`).

private let extremes: [UInt64] = [0, 1, 2, 255, 256, 65_535, 65_536, UInt64(UInt32.max), WireReader.maximumCount,
                                  WireReader.maximumCount + 1, .max - 1, .max]

private struct EpochFuzzInput: Sendable {
    /// Which pool record: a change, or the grant (`pool.changes.count`).
    var base: Int
    var numbers: [UInt64]
    var bytes: [UInt8]
    var damage: Int
    var position: Int

    func number(_ i: Int) -> UInt64 { numbers.isEmpty ? 0 : numbers[i % numbers.count] }
}

/// A few valid changes and a grant of one session, made once (sealing is the slow part); and
/// changes of a session with admins (issue 33: version 3, an admin-set change among them).
private struct Pool: Sendable {
    let group: EpochGroup
    let adminGroup: EpochGroup
    let changes: [EpochChange]
    let grant: EpochGrant

    init() {
        var g = EpochGroup(3, seed: 77)
        var made: [EpochChange] = []
        if let a = try? g.rekey(0, now: 1) { made.append(a); g.deliver([a], to: [1, 2], now: 1) }
        if let b = try? g.remove(1, [2], now: 2) { made.append(b); g.deliver([b], to: [0], now: 2) }
        var forked = EpochGroup(3, seed: 77)
        if let c = try? forked.rekey(2, now: 1) { made.append(c) }
        // Member 0 is the admin: it adds member 1, which then rekeys; member 2 is no admin.
        var admins = EpochGroup(3, seed: 78, admins: [0])
        if let d = try? admins.members[0].changeAdmins(to: [admins.node(0), admins.node(1)], members: admins.nodes, now: 1, using: &admins.rng) {
            made.append(d); admins.deliver([d], to: [1, 2], now: 1)
        }
        if let e = try? admins.rekey(1, now: 2) { made.append(e) }
        adminGroup = admins
        let stranger = Identity(seed: [UInt8](repeating: 42, count: 32))
        grant = EpochGrant(session: g.genesis.sessionID, epoch: 2, head: made.count > 1 ? made[1].hash : [], recipient: stranger.publicKey,
                           sealedKey: (try? SealedBox.seal([UInt8](repeating: 1, count: 40), to: stranger.publicKey)) ?? [])
        group = g
        changes = made
    }
}

private let pool = Pool()

private let inputGen = Generator<EpochFuzzInput, Shrink.None<EpochFuzzInput>> { rng in
    func number() -> UInt64 { Bool.random(using: &rng) ? extremes.randomElement(using: &rng) ?? 0 : UInt64.random(in: 0 ... .max, using: &rng) }
    return EpochFuzzInput(base: Int.random(in: 0...pool.changes.count, using: &rng),
                          numbers: (0..<Int.random(in: 1...8, using: &rng)).map { _ in number() },
                          bytes: (0..<Int.random(in: 0...120, using: &rng)).map { _ in UInt8.random(in: 0 ... .max, using: &rng) },
                          damage: Int.random(in: 0...5, using: &rng),
                          position: Int.random(in: 0...8192, using: &rng))
}

extension EpochFuzzInput {
    /// An encoding of a pool record, with extreme numbers written into its fields and counts.
    var encoding: [UInt8] {
        if base == pool.changes.count { return pool.grant.encoded() }
        var change = pool.changes[base % pool.changes.count]
        let key32 = Array(bytes.prefix(32)) + [UInt8](repeating: 0, count: max(0, 32 - bytes.count))
        switch number(0) % 5 {
        case 0: change.epoch = number(1)
        case 1: change.removed = Array(repeating: key32, count: Int(number(2) % 3))
        case 2: change.recipients = Array(change.recipients.prefix(Int(number(2) % 3)))
        // The admin set: none, a stranger's, the maker's alone, or a duplicate (not canonical).
        case 3: change.admins = [[], [key32], [change.makerNodeKey], [key32, key32]][Int(number(2) % 4)]
        default: break
        }
        // Half the time signed again by its maker, so the change gets past the signature to the rules.
        if number(6) % 2 == 0, let maker = (pool.group.members + pool.adminGroup.members).first(where: { $0.nodeKey == change.makerNodeKey }) {
            change.signature = maker.identity.sign(change.signedBytes())
        }
        var bytes = change.encoded()
        // Sometimes a count field says more than the bytes hold.
        if number(3) % 3 == 0, bytes.count > 92 {
            let at = number(4) % 2 == 0 ? 89 : 89 + 2 + 32 * change.removed.count + 32
            if at + 1 < bytes.count { bytes[at] = UInt8(truncatingIfNeeded: number(5) >> 8); bytes[at + 1] = UInt8(truncatingIfNeeded: number(5)) }
        }
        return bytes
    }

    var damaged: [UInt8] {
        var b = encoding
        switch damage {
        case 1: if !b.isEmpty { b[position % b.count] ^= UInt8(truncatingIfNeeded: 1 << (number(0) % 8)) }
        case 2: b = Array(b.prefix(position % (b.count + 1)))
        case 3: b += bytes
        case 4: b = bytes
        case 5: b = [1] + pool.group.genesis.sessionID + bytes
        default: break
        }
        return b
    }
}

@Test func noEpochInputAPeerCanSendTrapsTheDecodersOrTheEpochCore() {
    let run = FuzzRun("epoch", defaultCount: 2_000)
    let fuzzCount = run.count
    var core = pool.group.members[0]
    var rng = SWIMRandom(seed: 5)
    var now = 10.0, fed = 0
    // Undamaged inputs (damage 0) of each kind that the decoders took: each kind must reach the core.
    var changesDecoded = 0, grantsDecoded = 0, undamaged = 0
    for index in 0..<fuzzCount {
        var inputRNG = run.random(index)
        let input = inputGen.run(using: &inputRNG)
        if fed % 200 == 0 { core = [pool.group.members[0], pool.group.members[2], pool.adminGroup.members[2]][(fed / 200) % 3] }
        fed += 1
        now += 1
        let bytes = input.damaged
        run.record(index, bytes)
        if input.damage == 0 {
            undamaged += 1
            if input.base == pool.changes.count { if (try? EpochGrant.decode(bytes)) != nil { grantsDecoded += 1 } }
            else if (try? EpochChange.decode(bytes)) != nil { changesDecoded += 1 }
        }
        if let change = try? EpochChange.decode(bytes) {
            _ = core.receive(change, now: now)
            _ = core.admission(of: change.makerNodeKey, holding: change.parent, now: now)
            _ = core.handover(to: change.makerNodeKey, holding: change.parent, now: now, using: &rng)
        }
        if let grant = try? EpochGrant.decode(bytes) { _ = core.receive(grant, now: now) }
        _ = core.reissue(members: pool.group.nodes, now: now, using: &rng)
        _ = core.handshakeKeys(now: now)
    }
    #expect(fed == fuzzCount)
    // About 1 in 6 inputs is undamaged, one in six of those a grant; most changes keep counts that
    // decode. A decoder that refused everything (so the core never ran) fails here.
    print("epoch fuzz: \(fed) inputs, \(undamaged) undamaged: \(changesDecoded) changes and \(grantsDecoded) grants decoded")
    #expect(changesDecoded >= fuzzCount / 40, "only \(changesDecoded) undamaged changes decoded of \(fuzzCount) inputs")
    #expect(grantsDecoded >= fuzzCount / 100, "only \(grantsDecoded) undamaged grants decoded of \(fuzzCount) inputs")
}
