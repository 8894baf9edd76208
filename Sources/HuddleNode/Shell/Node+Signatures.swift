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
    /// On a link's reader, off the actor: the Ed25519 check of each batch, and of each message
    /// passed on alone (a repair's, a relay's), whose origin's key is known here. What passes is
    /// handed to the core with the messages, which then does not check it again on the actor
    /// (issue 35, item 4); the rest the core checks itself. A message of a batch checked already
    /// (in this read or an earlier one) costs the core one hash path, not a check.
    nonisolated func checkSignatures(_ messages: [LinkMessage]) -> [CheckedSignature] {
        var checked: [CheckedSignature] = []
        for message in messages {
            let check: CheckedSignature?
            switch message {
            case let .batch(batch): check = originNodeKeys.key(batch.origin).flatMap { MessageBatch.check(batch, originNodeKey: $0) }
            case let .message(signed):
                // Several of one batch passed on alone share its signature: checked once here.
                guard !checked.contains(where: { $0.signs(signed) }) else { continue }
                check = originNodeKeys.key(signed.message.origin).flatMap { MessageBatch.check(signed, originNodeKey: $0) }
            default: continue
            }
            if let check { checked.append(check) }
        }
        if !checked.isEmpty { originNodeKeys.checkedOffActor.add(checked.count, ordering: .relaxed) }
        return checked
    }

    /// After the core took `messages`: the node keys of their origins, for the next check.
    func learnOriginNodeKeys(_ messages: [LinkMessage]) {
        for message in messages {
            let origin: MemberID
            switch message {
            case let .batch(batch): origin = batch.origin
            case let .message(signed): origin = signed.message.origin
            default: continue
            }
            if !originNodeKeys.contains(origin), let key = swim.members[origin]?.node { originNodeKeys.set(origin, key) }
        }
    }
}
