import HuddleCore
import Synchronization

/// The node keys of the origins whose batches a link's reader checks itself (`Node.linkReceived`),
/// copied from the session core's membership after the core took a batch of theirs. Node keys are
/// pinned to their member (never replaced), and the core takes a check only when the key it was
/// made with is the one it holds (`SessionCore.signaturesChecked`): a stale or missing entry only
/// means the core checks that batch itself. Bounded: at most `limit` origins (emptied when full).
final class OriginNodeKeys: Sendable {
    static let limit = 4096
    private let keys = Mutex<[MemberID: [UInt8]]>([:])
    /// Batch signatures a link's reader checked and passed (`stats.signatures_checked_off_actor`).
    let checkedOffActor = Atomic<Int>(0)

    func key(_ origin: MemberID) -> [UInt8]? { keys.withLock { $0[origin] } }

    func contains(_ origin: MemberID) -> Bool { keys.withLock { $0[origin] != nil } }

    func set(_ origin: MemberID, _ key: [UInt8]) {
        keys.withLock { keys in
            if keys.count >= Self.limit { keys.removeAll() }
            keys[origin] = key
        }
    }
}

extension Node {
    /// On a link's reader, off the actor: the Ed25519 check of each batch whose origin's key is
    /// known here. What passes is handed to the core with the batches, which then does not check
    /// them again on the actor (issue 35, item 4); the rest the core checks itself.
    nonisolated func checkSignatures(_ messages: [LinkMessage]) -> [CheckedSignature] {
        var checked: [CheckedSignature] = []
        for case let .batch(batch) in messages {
            guard let key = originNodeKeys.key(batch.origin), let check = MessageBatch.check(batch, originNodeKey: key) else { continue }
            checked.append(check)
        }
        if !checked.isEmpty { originNodeKeys.checkedOffActor.add(checked.count, ordering: .relaxed) }
        return checked
    }

    /// After the core took `messages`: the node keys of their batches' origins, for the next check.
    func learnOriginNodeKeys(_ messages: [LinkMessage]) {
        for case let .batch(batch) in messages where !originNodeKeys.contains(batch.origin) {
            if let key = swim.members[batch.origin]?.node { originNodeKeys.set(batch.origin, key) }
        }
    }
}
