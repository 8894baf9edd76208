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
    @Test func linkTrafficNeverContainsAPlaintextBody() async throws {
        let cluster = try TestCluster("capture")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let parts = a.addr.split(separator: ":")
        let proxy = RecordingProxy()
        let port = try await proxy.start(upstream: (String(parts[0]), Int(parts[1]) ?? 0))
        let b = try await cluster.start("b", join: ["127.0.0.1:\(port)"])
        try await cluster.waitForFullMesh(2)
        let collectorA = try await EventCollector.subscribe(a, topics: ["messages"])
        let collectorB = try await EventCollector.subscribe(b, topics: ["messages"])
        let secret = "the eagle lands at midnight \(UUID().uuidString)"
        _ = try await b.request("send", ["text": .string(secret)])
        _ = try await a.request("send", ["text": .string(secret + " (reply)")])
        try await eventually("both messages to cross the proxied link") {
            let atA = await collectorA.messages().contains { $0["text"]?.stringValue == secret }
            let atB = await collectorB.messages().contains { $0["text"]?.stringValue == secret + " (reply)" }
            return atA && atB
        }
        try await Task.sleep(for: .milliseconds(200))
        let captured = await proxy.captured
        #expect(captured.count > 2 * secret.utf8.count, "the proxy saw the link's traffic")
        let needle = Array(secret.utf8)
        let found = captured.count >= needle.count && (0...(captured.count - needle.count)).contains { i in
            captured[i..<i + needle.count].elementsEqual(needle)
        }
        #expect(!found, "plaintext message body seen on the wire")
        await proxy.stop()
        await collectorA.stop()
        await collectorB.stop()
    }
}
