import Foundation
import HuddleControl
import HuddleCore
import HuddleCrypto
import Testing

/// A member that holds the session key but speaks for someone else: it opens a real link
/// (TCP + the Noise handshake) to a node and writes link messages by hand.
final class ImpostorLink {
    private let fd: Int32
    private var send: NoiseCipherState?
    /// The link's datagram keys, as the impostor holds them: what it may seal datagrams with.
    let datagramKeys: PairDatagramKeys

    init(host: String, port: UInt16, key: SessionKey, identity: Identity, info: MemberInfo) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let ok = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard ok == 0 else { throw TestTimeout(description: "cannot connect to \(host):\(port)") }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var handshake = try LinkHandshake(role: .initiator, sessionKey: key, identity: identity, appPayload: info.encoded())
        try Self.writeFrame(fd, try handshake.start())
        guard let reply = try handshake.receive(try Self.readFrame(fd)) else { throw TestTimeout(description: "no handshake message 3") }
        try Self.writeFrame(fd, reply)
        guard let result = handshake.result else { throw TestTimeout(description: "handshake incomplete") }
        self.send = result.send
        datagramKeys = result.datagramKeys
    }

    func write(_ message: LinkMessage) throws {
        guard var cipher = send else { throw TestTimeout(description: "no transport cipher") }
        for record in LinkRecords.split(message.encoded()) { try Self.writeFrame(fd, try cipher.encrypt(ad: [], plaintext: record)) }
        send = cipher
    }

    func close() { Glibc.close(fd) }

    private static func writeFrame(_ fd: Int32, _ bytes: [UInt8]) throws {
        let frame = [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
        let n = frame.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard n == frame.count else { throw TestTimeout(description: "short write") }
    }

    private static func readExactly(_ fd: Int32, _ count: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        while out.count < count {
            var buffer = [UInt8](repeating: 0, count: count - out.count)
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw TestTimeout(description: "link closed during the handshake") }
            out += buffer[..<n]
        }
        return out
    }

    private static func readFrame(_ fd: Int32) throws -> [UInt8] {
        let header = try readExactly(fd, 2)
        return try readExactly(fd, Int(header[0]) << 8 | Int(header[1]))
    }
}

@Suite(.timeLimit(.minutes(3)))
struct ForgedMessageTests {
    @Test func aMessageNotSignedByItsClaimedOriginIsDroppedAndCounted() async throws {
        let cluster = try TestCluster("forged")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let b = try await cluster.start("b")
        try await cluster.waitForFullMesh(2)
        let events = try await EventCollector.subscribe(a, topics: ["messages"])
        guard let victim = MemberID(b.member) else { Issue.record("bad member id"); return }
        let parts = a.addr.split(separator: ":")
        let mallory = Identity.generate()
        let info = MemberInfo(id: MemberID(raw: 0xBAD), node: mallory.publicKey, name: "mallory", addr: "127.0.0.1:9")
        let link = try ImpostorLink(host: String(parts[0]), port: UInt16(parts[1]) ?? 0, key: try SessionKey.load(from: cluster.key), identity: mallory, info: info)
        defer { link.close() }
        // Signed by mallory, claiming to be b's next broadcast and a directed message from b.
        let lie = WireMessage(from: victim, counter: 999, seq: 1, to: nil, body: Array("transfer all funds".utf8))
        let directed = WireMessage(from: victim, counter: 1000, seq: 0, to: [MemberID(a.member) ?? victim], body: Array("psst".utf8))
        let flush = MessageBatch.sign([lie, directed], identity: mallory)
        for signed in flush { try link.write(.message(signed)) }
        // And the same lies as a whole batch, the way an origin sends its flushes.
        if let batch = SignedBatch(of: flush, for: MemberID(a.member) ?? victim) { try link.write(.batch(batch)) }
        try await eventually("a to count the forged messages, alone and batched") {
            (try await a.request("stats")["messages_forged"]?.intValue ?? 0) >= 4
        }
        // b's real message still arrives, and nothing forged was delivered.
        _ = try await b.request("send", ["text": "the real one"])
        try await eventually("b's real message") { await events.messages().contains { $0["text"]?.stringValue == "the real one" } }
        let texts = await events.messages().compactMap { $0["text"]?.stringValue }
        #expect(!texts.contains("transfer all funds") && !texts.contains("psst"))
        #expect(await events.messages().first { $0["text"]?.stringValue == "the real one" }?["seq"] == .int(1))
        await events.stop()
    }
}
