import Foundation
import HuddleControl
import NIOCore
import NIOPosix
import Testing

/// A TCP relay on loopback that records every byte it forwards in both directions.
actor RecordingProxy {
    private(set) var captured: [UInt8] = []
    private var server: Channel?

    func record(_ bytes: ByteBuffer) { captured.append(contentsOf: bytes.readableBytesView) }

    /// Listens on a free loopback port and forwards each connection to `upstream`; returns the port.
    func start(upstream: (host: String, port: Int)) async throws -> Int {
        let group = MultiThreadedEventLoopGroup.singleton
        let channel = try await ServerBootstrap(group: group)
            .childChannelInitializer { inbound in
                ClientBootstrap(group: group)
                    .channelInitializer { outbound in
                        outbound.pipeline.addHandler(Relay(peer: inbound, proxy: self))
                    }
                    .connect(host: upstream.host, port: upstream.port)
                    .flatMap { outbound in inbound.pipeline.addHandler(Relay(peer: outbound, proxy: self)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        server = channel
        return channel.localAddress?.port ?? 0
    }

    func stop() { server?.close(promise: nil) }

    private final class Relay: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let peer: Channel
        let proxy: RecordingProxy
        init(peer: Channel, proxy: RecordingProxy) { self.peer = peer; self.proxy = proxy }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data)
            let proxy = self.proxy
            Task { await proxy.record(bytes) }
            peer.writeAndFlush(bytes, promise: nil)
        }
        func channelInactive(context: ChannelHandlerContext) { peer.close(promise: nil) }
    }
}

@Suite(.timeLimit(.minutes(10)))
struct CapturedTrafficTests {
    /// Both members sit behind recording relays (`StallableRelay`) they advertise, so every link
    /// between them, whoever dialed it, crosses a relay the test owns: the relays count the bytes
    /// that crossed while the two messages went (at least each message's length: the messages did
    /// cross), and the recorded bytes never hold a body in plaintext.
    @Test func linkTrafficNeverContainsAPlaintextBody() async throws {
        let cluster = try TestCluster("capture")
        let ra = try StallableRelay(recording: true), rb = try StallableRelay(recording: true)
        defer {
            ra.close()
            rb.close()
            cluster.shutdown()
        }
        let (a, _) = try await cluster.startBehindRelay("a", relay: ra)
        let (b, _) = try await cluster.startBehindRelay("b", join: [ra.addr], relay: rb)
        try await cluster.waitForFullMesh(2)
        let collectorA = try await EventCollector.subscribe(a, topics: ["messages"])
        let collectorB = try await EventCollector.subscribe(b, topics: ["messages"])
        // Long enough that the bytes crossing while it is sent cannot be the link's chatter alone.
        let secret = "the eagle lands at midnight " + (0..<40).map { _ in UUID().uuidString }.joined(separator: " ")
        let crossedBefore = ra.bytesRelayed + rb.bytesRelayed
        _ = try await b.request("send", ["text": .string(secret)])
        _ = try await a.request("send", ["text": .string(secret + " (reply)")])
        try await eventually("both messages to cross the relayed link") {
            let atA = await collectorA.messages().contains { $0["text"]?.stringValue == secret }
            let atB = await collectorB.messages().contains { $0["text"]?.stringValue == secret + " (reply)" }
            return atA && atB
        }
        let crossed = ra.bytesRelayed + rb.bytesRelayed - crossedBefore
        #expect(crossed >= 2 * secret.utf8.count, "\(crossed) bytes crossed the relays while two messages of \(secret.utf8.count) bytes went: they did not cross")
        let captured = ra.capturedBytes + rb.capturedBytes
        let needle = Array(secret.utf8.prefix(64))
        let found = captured.count >= needle.count && (0...(captured.count - needle.count)).contains { i in
            captured[i..<i + needle.count].elementsEqual(needle)
        }
        #expect(!found, "plaintext message body seen on the wire")
        print("captured traffic: \(crossed) bytes crossed the relays for two messages of \(secret.utf8.count) bytes; \(captured.count) recorded in all")
        await collectorA.stop()
        await collectorB.stop()
    }
}
