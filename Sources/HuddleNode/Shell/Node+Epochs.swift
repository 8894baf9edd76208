import HuddleControl
import HuddleCore
import HuddleCrypto

/// The shell's part of epochs (issue 21): switching to a new epoch's key, and the `remove` and
/// `rekey` ops. The rules are the session core's (`SessionCore+Epochs`).
extension Node {
    /// The session moved to `key`'s epoch here: new links and session-key datagrams use it from
    /// now on (links already up keep their own transport keys), and the key file is rewritten
    /// atomically (temporary file, fsync, rename, mode 0600) so a restart starts from this epoch:
    /// on the I/O queue (`NodeIO`), after every commit handed over before, in the order the epochs
    /// moved.
    func moveToEpoch(_ key: SessionKey) {
        currentKey = key
        seal = DatagramSeal(key: key.subkey(.datagram))
        publishDatagramKeys(force: true)
        let path = config.keyPath, log = self.log
        io.submit {
            NodeIO.checkCurrent("the key file's rewrite")
            do {
                try key.rewrite(at: path)
                log.info("session \(key.fingerprint) is on epoch \(key.epoch) now; \(path) holds its key")
            } catch {
                log.error("session \(key.fingerprint) is on epoch \(key.epoch) now, but \(path) could not be rewritten (a restart starts from the older epoch and is handed this one): \(error)")
            }
        }
        wake(.epoch)
    }

    /// Longest `remove` and `rekey` wait for every remaining live member to say it is on the new epoch.
    static let epochReplyWait = Duration.seconds(15)

    /// `remove`: `target` is a member id (16 hex digits) or a node key (64 hex digits).
    func removeOp(_ target: String) async throws(ControlError) -> JSONObject {
        let node: [UInt8]
        if ControlRequest.isMemberID(target), let id = MemberID(target) {
            guard let info = swim.members[id] else { throw ControlError(.notFound, "no member \(target)") }
            node = info.node
        } else if let key = bytesFromHex(target), key.count == 32 {
            node = key
        } else {
            throw ControlError(.badRequest, "\"member\" must be a member id (16 hex digits) or a node key (64 hex digits)")
        }
        guard node != local.node else { throw ControlError(.badRequest, "a member cannot remove itself (use leave)") }
        return try await rotate { core, now throws(CoreError) in try core.remove(nodes: [node], now: now) }
    }

    /// `rekey`: the same rotation with nobody removed.
    func rekeyOp() async throws(ControlError) -> JSONObject {
        try await rotate { core, now throws(CoreError) in try core.rekey(now: now) }
    }

    /// `admins`: reads the admin set, or (with `add` or `remove`) moves the session to a new epoch
    /// whose admin set has them added and removed (issue 33). Replies with the epoch and the set.
    func adminsOp(add: [String], remove: [String]) async throws(ControlError) -> JSONObject {
        var reply: JSONObject = ["epoch": .int(Int64(clamping: core.epoch))]
        if !add.isEmpty || !remove.isEmpty {
            let keys = { (list: [String]) in Set(list.compactMap(bytesFromHex)) }
            let admins = Set(core.epochs.admins).union(keys(add)).subtracting(keys(remove))
            reply = try await rotate { core, now throws(CoreError) in try core.changeAdmins(to: Array(admins), now: now) }
            // A concurrent change on the same epoch can win the fork choice: an added admin is then
            // not added (a dropped one is dropped again by the next change: `pendingDemotions`).
            if Set(core.epochs.admins) != admins {
                let now = core.epochs.admins.map(hexString).joined(separator: ", ")
                throw ControlError(.busy, "a concurrent epoch change won over this one; the admins are [\(now)]: ask again")
            }
        }
        reply["admins"] = .array(core.epochs.admins.map { .string(hexString($0)) })
        return reply
    }

    /// Makes the change, carries it out, and replies once every remaining live member said it is on
    /// the new epoch (or a later one), or after `epochReplyWait` (the change is made either way).
    private func rotate(_ make: (inout SessionCore, Double) throws(CoreError) -> (EpochChange, [SessionEffect])) async throws(ControlError) -> JSONObject {
        let (change, effects): (EpochChange, [SessionEffect])
        do { (change, effects) = try make(&core, now) } catch { throw Self.controlError(error) }
        execute(effects)
        let head = change.hash
        let deadline = ContinuousClock.now + Self.epochReplyWait
        while !everyoneOn(head) && ContinuousClock.now < deadline && mayWait {
            await wait(for: .epoch, until: deadline)
        }
        return ["epoch": .int(Int64(clamping: core.epoch))]
    }

    /// Whether every live member linked here said it is on `head`, or the session moved past it.
    /// Only linked members say (`peerHeads` is told over links): one without a link here hears of
    /// the change through the others, and is not waited for.
    private func everyoneOn(_ head: [UInt8]) -> Bool {
        guard core.epochs.head == head else { return true }
        return core.live.subtracting([local.id]).allSatisfy { links[$0] == nil || core.peerHeads[$0] == head }
    }

    /// The control error for an epoch change this member could not make: the core's line, under
    /// the control protocol's code for its reason.
    private static func controlError(_ error: CoreError) -> ControlError {
        let code: ControlError.Code = switch error.code {
        case .notAdmin, .notHandedCurrentKey, .notOnRoster: .notMember
        case .adminsUnchangeable, .removingSelf, .nobodyToRemove, .tooManyToRemove, .cannotSeal: .badRequest
        case .rateLimited: .busy
        default: .internal
        }
        return ControlError(code, error.message)
    }}
