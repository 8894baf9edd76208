import Foundation
import HuddleControl
import HuddleCore
import NIOCore

extension Node {
    /// What `send` asked for, checked against limits and membership.
    struct SendRequest {
        var body: [UInt8]
        var to: [MemberID]?
        var reliable: Bool
    }

    /// Sends a message and delivers it here too when this member is a recipient.
    func send(_ request: SendRequest) throws(ControlError) -> WireMessage {
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
        let message = request.reliable && request.to == nil
            ? sequencer.makeBroadcast(body: request.body)
            : sequencer.makeUnsequenced(body: request.body, to: request.to)
        let targets = request.to.map { $0.filter { $0 != local.id } } ?? Array(links.keys)
        if request.reliable {
            let encoded = LinkMessage.message(message).encoded()
            for target in targets { links[target]?.send(encoded) }
        } else {
            for target in targets {
                if let addr = swim.members[target]?.addr { sendDatagram(.message(message), to: addr) }
            }
        }
        _ = counters.messagesSent.wrappingAdd(1, ordering: .relaxed)
        if request.to?.contains(local.id) ?? true { deliver(message, reliable: request.reliable) }
        return message
    }

    func receiveReliable(_ m: WireMessage, on link: LinkHandle) {
        guard m.from == link.peer.id else {
            log.warning("dropped a message claiming origin \(m.from) on the link from \(link.peer.id)")
            return
        }
        if let to = m.to, !to.contains(local.id) { return }
        if sequencer.accept(m) { deliver(m, reliable: true) }
    }

    func deliver(_ m: WireMessage, reliable: Bool) {
        _ = counters.messagesDelivered.wrappingAdd(1, ordering: .relaxed)
        var fields: JSONObject = [
            "msg": .string(m.id),
            "from": .string(m.from.description),
            "seq": m.seq == 0 ? .null : .int(Int64(m.seq)),
            "deps": .object(JSONObject(pairs: m.deps.map { ($0.member.description, JSON.int(Int64($0.seq))) })),
            "to": m.to.map { .array($0.map { .string($0.description) }) } ?? .null,
            "reliable": .bool(reliable),
            "data": .string(Data(m.body).base64EncodedString()),
        ]
        if let text = String(validating: m.body, as: UTF8.self) { fields["text"] = .string(text) }
        events.append("message", topic: .messages, fields)
    }

    // MARK: datagrams

    func sendDatagram(_ content: DatagramPayload.Content, to addr: String) {
        guard let address = datagramAddress(addr) else { return }
        datagramCounter += 1
        let sealed = seal.seal(DatagramPayload(sender: local.id, counter: datagramCounter, content: content).encoded())
        if case .swim = content { counters.addSent(.gossip, sealed.count) } else { counters.addSent(.messages, sealed.count) }
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
        if replayWindows[payload.sender] == nil && replayWindows.count >= 4096 {
            replayWindows = replayWindows.filter { swim.members[$0.key] != nil }
        }
        guard replayWindows[payload.sender, default: ReplayWindow()].accept(payload.counter) else {
            _ = counters.droppedDatagrams.wrappingAdd(1, ordering: .relaxed)
            return
        }
        switch payload.content {
        case let .swim(message):
            guard message.sender == payload.sender else { return }
            execute(swim.receive(message, from: source, now: now))
        case let .message(m):
            guard m.from == payload.sender, m.seq == 0, isLive(m.from) else { return }
            if let to = m.to, !to.contains(local.id) { return }
            deliver(m, reliable: false)
        }
    }
}
