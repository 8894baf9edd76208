import Foundation
import HuddleControl
import HuddleCore
import HuddleCrypto
import NIOCore

extension Node {
    /// What `send` asked for, checked against limits and membership.
    struct SendRequest {
        var body: [UInt8]
        var to: [MemberID]?
        var reliable: Bool
    }

    /// How long a send waits for full retransmit buffers to drain before it answers `busy`.
    static let backpressureWait = Duration.seconds(5)

    /// Sends a message and delivers it here too when this member is a recipient.
    func send(_ request: SendRequest) async throws(ControlError) -> WireMessage {
        let limit = request.reliable ? config.maxMessageBytes : config.maxUnreliableBytes
        guard request.body.count <= limit else {
            throw ControlError(code: .tooLarge, message: "message body is \(request.body.count) bytes; the limit for \(request.reliable ? "reliable" : "unreliable") sends is \(limit)")
        }
        if let to = request.to {
            for target in to where target != local.id {
                guard isLive(target) else {
                    throw ControlError(code: swim.members[target] == nil ? .notFound : .notMember, message: "\(target) is not a live member of this session")
                }
            }
        }
        guard request.reliable else {
            let message = core.broadcast.makeUnreliable(body: request.body, to: request.to)
            let targets = request.to ?? Array(swim.members.keys)
            for target in targets where target != local.id && isLive(target) {
                if let addr = swim.members[target]?.addr { sendDatagram(.message(message), to: addr) }
            }
            _ = counters.messagesSent.wrappingAdd(1, ordering: .relaxed)
            if request.to?.contains(local.id) ?? true { deliver(message, reliable: false) }
            return message
        }
        let deadline = ContinuousClock.now + Self.backpressureWait
        while broadcast.isCongested {
            guard ContinuousClock.now < deadline else {
                throw ControlError(code: .busy, message: "retransmit buffers are full (\(broadcast.storedBytes) bytes held for slow members); try again")
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        let message = request.to.map { core.broadcast.makeDirected(body: request.body, to: $0) } ?? core.broadcast.makeBroadcast(body: request.body)
        queueForSigning(message)
        _ = counters.messagesSent.wrappingAdd(1, ordering: .relaxed)
        if request.to?.contains(local.id) ?? true { deliver(message, reliable: true) }
        return message
    }

    /// Most body bytes one signed batch carries: a batch crosses a link as one link message, which
    /// must stay within `LinkSession.maximumMessage` (one message alone may be larger, up to the body limit).
    static let batchBytes = 256 * 1024

    /// Adds a message to the batch the next flush signs; schedules that flush.
    func queueForSigning(_ message: WireMessage) {
        if !pendingBatch.isEmpty && pendingBatchBytes + message.body.count > Self.batchBytes { flushBatch() }
        pendingBatch.append(message)
        pendingBatchBytes += message.body.count
        if pendingBatch.count == 1 {
            spawner.spawn { [self] in await flushBatch() }
        } else if pendingBatch.count >= BatchProof.maximumBatch {
            flushBatch()
        }
    }

    /// Signs the pending messages with one signature and writes each link the part of the batch
    /// that is for its peer (all of it, unless the batch holds directed messages).
    func flushBatch() {
        guard !pendingBatch.isEmpty else { return }
        let batch = pendingBatch
        pendingBatch = []
        pendingBatchBytes = 0
        let flush = MessageBatch.sign(batch, identity: security.identity)
        for signed in flush { core.broadcast.stored(own: signed) }
        if flush.allSatisfy({ $0.message.to == nil }) {
            guard !links.isEmpty, let whole = SignedBatch(of: flush, for: local.id) else { return }
            let encoded = LinkMessage.batch(whole).encoded()
            for link in links.values { link.send(encoded) }
        } else {
            for (peer, link) in links {
                if let part = SignedBatch(of: flush, for: peer) { link.send(LinkMessage.batch(part).encoded()) }
            }
        }
    }

    /// A batch from its origin: its signature checked once, then each message to the core.
    func receiveBatch(_ batch: SignedBatch) {
        guard let key = swim.members[batch.origin]?.node else { return }
        guard MessageBatch.verify(batch, originKey: key, cache: &verifiedRoots) else {
            _ = counters.forged.wrappingAdd(batch.messages.count, ordering: .relaxed)
            log.warning("dropped a batch of \(batch.messages.count) messages that claims origin \(batch.origin) but is not signed by it")
            return
        }
        for signed in batch.messages { execute(core.receive(signed)) }
    }

    /// A message from its origin or a relay: verified against the origin's key, then to the core.
    func receiveSigned(_ signed: SignedMessage) {
        guard let key = swim.members[signed.message.from]?.node else { return }
        guard MessageBatch.verify(signed, originKey: key, cache: &verifiedRoots) else {
            _ = counters.forged.wrappingAdd(1, ordering: .relaxed)
            log.warning("dropped a message that claims origin \(signed.message.from) but is not signed by it")
            return
        }
        execute(core.receive(signed))
    }

    func deliver(_ m: WireMessage, reliable: Bool) {
        _ = counters.messagesDelivered.wrappingAdd(1, ordering: .relaxed)
        events.appendMessage(m, reliable: reliable)
    }

    // MARK: activity

    func setActivity(_ value: JSON) {
        var bytes: [UInt8] = []
        value.write(into: &bytes)
        let record = ActivityRecord.make(lamport: core.activity.nextLamport(), setBy: local.id, value: bytes, identity: security.identity)
        receiveActivity(record)
        let encoded = LinkMessage.activity(record).encoded()
        for link in links.values { link.send(encoded) }
    }

    func receiveActivity(_ record: ActivityRecord) {
        guard record.setBy == local.id || swim.members[record.setBy].map({ record.verify(nodeKey: $0.node) }) ?? false else {
            if swim.members[record.setBy] != nil { _ = counters.forged.wrappingAdd(1, ordering: .relaxed) }
            return
        }
        guard core.activity.apply(record) else { return }
        events.append("activity", topic: .activity, activityFields())
    }

    func activityFields() -> JSONObject {
        guard let current = activity.current, let value = try? JSON.parse(current.value) else { return ["activity": .null, "set_by": .null] }
        return ["activity": value, "set_by": .string(current.setBy.description)]
    }

    // MARK: datagrams

    func sendDatagram(_ content: DatagramPayload.Content, to addr: String) {
        guard let address = datagramAddress(addr) else { return }
        datagramCounter += 1
        let sealed = seal.seal(DatagramPayload(sender: local.id, counter: datagramCounter, content: content).encoded())
        if case .swim = content { counters.addDatagramSent(.gossip, bytes: sealed.count) } else { counters.addDatagramSent(.messages, bytes: sealed.count) }
        datagramOutbox.push(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(bytes: sealed)), bytes: sealed.count)
    }

    private func datagramAddress(_ addr: String) -> SocketAddress? {
        if let cached = datagramAddresses[addr] { return cached }
        guard let (host, port) = try? parseHostPort(addr), let address = try? SocketAddress.makeAddressResolvingHost(host, port: port) else {
            return nil
        }
        if datagramAddresses.count > 4096 { datagramAddresses = [:] }
        datagramAddresses[addr] = address
        return address
    }

    /// A datagram that opened under the session key: replay-checked, then handled. `source` is the
    /// sender's UDP address (`host:port`), where SWIM sends its answers.
    func datagramReceived(_ payload: DatagramPayload, from source: String) {
        execute(core.receiveDatagram(payload, from: source, now: now))
    }
}
