import HuddleCore
import NIOCore
import NIOPosix

/// UDP on the listen port: sealed datagrams in, the node's datagram outbox out.
enum DatagramTransport {
    typealias Channel = NIOAsyncChannel<AddressedEnvelope<ByteBuffer>, AddressedEnvelope<ByteBuffer>>

    static func bind(host: String, port: Int) async throws -> Channel {
        try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 65_536))
            .bind(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture { try Channel(wrappingChannelSynchronously: channel) }
            }
    }

    /// Reads until the channel closes, writes until the outbox closes.
    static func run(_ channel: Channel, node: Node) async {
        try? await channel.executeThenClose { inbound, outbound in
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    while let batch = await node.datagramOutbox.takeAll() {
                        try? await outbound.write(contentsOf: batch)
                    }
                    channel.channel.close(promise: nil)
                }
                do {
                    for try await envelope in inbound {
                        let bytes = Array(envelope.data.readableBytesView)
                        guard let plain = try? node.seal.open(bytes), let payload = try? DatagramPayload.decode(plain) else {
                            _ = node.counters.droppedDatagrams.wrappingAdd(1, ordering: .relaxed)
                            continue
                        }
                        if case .swim = payload.content { node.counters.addReceived(.gossip, bytes.count) } else { node.counters.addReceived(.messages, bytes.count) }
                        await node.datagramReceived(payload, from: hostPort(envelope.remoteAddress))
                    }
                } catch {
                    node.log.warning("datagram socket closed: \(error)")
                }
                node.datagramOutbox.close()
            }
        }
    }
}

/// `host:port` of a socket address, with IPv6 hosts in brackets.
func hostPort(_ address: SocketAddress) -> String {
    let host = address.ipAddress ?? "?"
    let port = address.port ?? 0
    if case .v6 = address { return "[\(host)]:\(port)" }
    return "\(host):\(port)"
}
