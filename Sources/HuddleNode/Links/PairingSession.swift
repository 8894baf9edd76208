import HuddleCore
import HuddleCrypto
import NIOCore

/// Pairing by one-time invitation code over one TCP connection to a member's listen port, in
/// link framing (`PairingHandshake` holds the protocol; this only carries its frames).
enum PairingSession {
    /// The member's side, after the connection's first frame turned out to be a pairing hello.
    /// The listen port's handshake timeout bounds the whole exchange.
    static func respond(hello frame: [UInt8], frames: inout FrameIterator, write: ([UInt8]) async throws -> Void, remote: String, node: Node) async throws {
        let hello: PairingHandshake.Hello
        do { hello = try PairingHandshake.parseHello(frame) } catch {
            node.log.info("refused a pairing from \(remote): \(error)")
            return
        }
        let password: [UInt8]
        switch await node.beginPairing(nameplate: hello.nameplate, from: remote) {
        case let .refused(reason):
            try await write(PairingHandshake.refusal(reason))
            return
        case let .accepted(code):
            password = code
        }
        var confirmed = false
        defer { if !confirmed { Task { await node.pairingEnded(nameplate: hello.nameplate, from: remote, confirmed: false) } } }
        let member = try PairingHandshake.Member(hello: hello, password: password)
        try await write(member.answer)
        guard let reply = try await frames.next(), member.confirms(Array(reply.readableBytesView)) else { return }
        confirmed = true
        await node.pairingEnded(nameplate: hello.nameplate, from: remote, confirmed: true)
        try await write(member.sealKey(await node.currentKey))
    }

    /// The new host's side: connects to a member at `addr` and returns the session key it sent.
    /// Throws `CryptoError` (a wrong code, a refusal) or `NodeError` (no connection) in one line.
    static func join(addr: String, nameplate: UInt32, password: [UInt8]) async throws -> SessionKey {
        let channel = try await LinkSession.connect(try await PeerAddress.resolveUserAddress(addr), timeout: .seconds(10))
        return try await channel.executeThenClose { inbound, outbound in
            var frames = FrameIterator(inbound.makeAsyncIterator())
            let timeout = channel.channel.eventLoop.scheduleTask(in: LinkSession.handshakeTimeout) { channel.channel.close(promise: nil) }
            defer { timeout.cancel() }
            func write(_ bytes: [UInt8]) async throws {
                var buffer = channel.channel.allocator.buffer(capacity: bytes.count + 2)
                buffer.writeFrame(bytes)
                try await outbound.write(buffer)
            }
            func read(_ what: String) async throws -> [UInt8] {
                guard let frame = try await frames.next() else { throw NodeError("\(addr) closed the connection before its \(what)") }
                return Array(frame.readableBytesView)
            }
            var joiner = try PairingHandshake.Joiner(nameplate: nameplate, password: password)
            try await write(joiner.hello)
            try await write(try joiner.receiveAnswer(try await read("answer")))
            return try joiner.receiveKey(try await read("key"))
        }
    }
}
