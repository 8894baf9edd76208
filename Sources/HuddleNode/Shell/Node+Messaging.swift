import Foundation
import HuddleControl
import HuddleCore
import HuddleCrypto
import NIOCore

extension Node {
    /// What `send` asked for.
    struct SendRequest {
        var body: [UInt8]
        /// How many leading bytes of `body` are a client's envelope (`SessionCore.envelopeAllowance`).
        var envelope = 0
        var to: [MemberID]?
        var reliable: Bool
    }

    /// How long a send waits for full retransmit buffers to drain before it answers `busy`.
    static let backpressureWait = Duration.seconds(5)

    /// About the most bytes of this member's messages made but not yet committed before `send`
    /// waits for the commit (with `uncommittedSendLimit`, the most messages): counted as messages
    /// of the size of the one being sent, at least `uncommittedSendFloor`. Each uncommitted message
    /// is held several times until its commit completes (stored for retransmission, its event in
    /// the spool's tail, both again in the commit's records), so 2,048 messages of 16 KiB took the
    /// sender of huddle-bench's 16 KiB throughput row to 131-139 MiB, and the receivers it ran ahead
    /// of to 88-112 MiB; within 4 MiB, 64-74 MiB at the same msgs/s.
    static let uncommittedSendBytes = 4 << 20
    static let uncommittedSendFloor: UInt64 = 64

    /// How many of this member's messages of `size` bytes may be uncommitted before `send` waits.
    static func uncommittedSendsAllowed(size: Int) -> UInt64 {
        min(uncommittedSendLimit, max(uncommittedSendFloor, UInt64(uncommittedSendBytes / max(size, 1))))
    }

    /// Sends a message (the session core decides; `SessionCore.send`). A send refused as busy
    /// waits until the core reports the congestion cleared, for at most `backpressureWait`.
    func send(_ request: SendRequest) async throws(ControlError) -> WireMessage {
        // A commit in flight with `uncommittedSendsAllowed(size:)` of this member's messages not yet
        // in one: the send waits for it (as it waited for this actor when commits ran on it), so a
        // fast client cannot pile messages up behind a slow disk.
        let limit = Self.uncommittedSendsAllowed(size: request.body.count)
        while state != nil && commitInFlight && core.broadcast.ownSeq &- durable.ownSeq >= limit && !stateFailed && mayWait {
            await wait(for: .committed)
        }
        await waitForEventWriter()
        let deadline = ContinuousClock.now + Self.backpressureWait
        while true {
            do throws(CoreError) {
                let (message, effects) = try core.send(body: request.body, envelope: request.envelope, to: request.to, reliable: request.reliable)
                _ = counters.messagesSent.wrappingAdd(1, ordering: .relaxed)
                if metrics != nil, request.reliable, request.to == nil { hopStamps.made.add(message.seq) }
                execute(effects)
                // Answered before the commit (within moments, batched): waiting for it here took the
                // 256 B throughput row from 21,189 to 373 msgs/s (requests on one connection are
                // answered in turn). A crash in that moment loses the acknowledged message.
                return message
            } catch {
                switch error.code {
                case .busy:
                    guard ContinuousClock.now < deadline, mayWait else { throw ControlError(.busy, error.message) }
                    await wait(for: .congestion, until: deadline)
                case .tooLarge: throw ControlError(.tooLarge, error.message)
                case .unknownMember: throw ControlError(.notFound, error.message)
                case .notMember: throw ControlError(.notMember, error.message)
                default: throw ControlError(.internal, error.message)
                }
            }
        }
    }

    /// A message event, numbered as the control protocol numbers messages (`ApplicationSeqs.view`).
    /// Read through the `applicationSeqs` field: calling a method of `core` itself from this actor
    /// copies the whole core first (every table retained, then released), once per message.
    func deliver(_ m: WireMessage, reliable: Bool) {
        _ = counters.messagesDelivered.wrappingAdd(1, ordering: .relaxed)
        if let metrics {
            let now = ContinuousClock.now
            if let arrived = batchArrived { metrics.deliveryLatency.recordNanoseconds(NodeMetrics.nanoseconds(now - arrived)) }
            if let taken = batchTaken { metrics.record(.core, now - taken) }
            // Shown once a commit holds it (a data directory), else at once.
            if state != nil { hopStamps.appended.add(events.latest &+ 1, at: now) }
        }
        events.appendMessage(core.applicationSeqs.view(m), reliable: reliable)
    }

    // MARK: activity

    func setActivity(_ value: JSON) {
        var bytes: [UInt8] = []
        value.write(into: &bytes)
        let now = self.now
        core.setWallClock(wallClock.now(), now: now)
        execute(core.setActivity(bytes, now: now))
    }

    func activityFields() -> JSONObject {
        guard let current = activity.current, let value = try? JSON.parse(current.value) else { return ["activity": .null, "set_by": .null] }
        return ["activity": value, "set_by": .string(current.setBy.description)]
    }

    // MARK: datagrams

    /// Seals a datagram the core decided to send, as it said (`DatagramKeyring.seal`), and queues it.
    func sendDatagram(_ payload: DatagramPayload, to addr: String, sealing: DatagramSealing) {
        guard let address = datagramAddress(addr), let sealed = core.datagramKeys.seal(payload, sealing, session: seal) else { return }
        if case .swim = payload.content { counters.addDatagramSent(.gossip, bytes: sealed.count) } else { counters.addDatagramSent(.messages, bytes: sealed.count) }
        datagramOutbox.push(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(bytes: sealed)), bytes: sealed.count)
    }

    private func datagramAddress(_ addr: String) -> SocketAddress? {
        if let cached = datagramAddresses[addr] { return cached }
        // Numeric only: an address comes from a peer, and the actor never waits on DNS for one.
        guard let address = PeerAddress.socketAddress(addr) else { return nil }
        if datagramAddresses.count > 4096 { datagramAddresses = [:] }
        datagramAddresses[addr] = address
        return address
    }

    /// A datagram that opened (on the receive thread, `DatagramOpener`): the core judges its form
    /// and counter, then handles it. `source` is the sender's UDP address (`host:port`), where SWIM
    /// sends its answers.
    func datagramReceived(_ datagram: OpenedDatagram, from source: String) {
        // An unreliable message is an event: while the spool's writer is behind (a disk that
        // throttles its writes) it is dropped, as unreliable messages may be, rather than waited
        // for — SWIM's datagrams behind it must not wait for the disk.
        if case .message = datagram.payload.content, events.spoolWriterBehind {
            _ = counters.unreliableDropped.wrappingAdd(1, ordering: .relaxed)
            return
        }
        execute(core.receiveDatagram(datagram, from: source, now: now))
    }
}
