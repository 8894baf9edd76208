import Foundation
import HuddleCore
import NIOCore

/// UDP on the listen port: sealed datagrams in (opened on a receive thread with the node's current
/// `DatagramOpener`: the session key and its links' keys), the node's datagram
/// outbox out. A datagram the kernel refuses to send is lost like any other UDP datagram; the
/// socket stays open (see `UDPSocket`).
enum DatagramTransport {
    static func bind(host: String, port: Int) throws -> UDPSocket {
        try UDPSocket(host: host, port: port)
    }

    /// Receives until the socket closes, sends until the outbox closes; then closes the socket.
    static func run(_ socket: UDPSocket, node: Node) async {
        // Opened datagrams go from the receive thread to the node in order; when the node falls
        // behind by this many, newer datagrams are dropped (UDP semantics, memory stays bounded).
        let (inbound, feed) = AsyncStream.makeStream(of: (OpenedDatagram, String).self, bufferingPolicy: .bufferingOldest(8192))
        let receiver = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            loop: while true {
                let result = buffer.withUnsafeMutableBytes { socket.receive(into: $0) }
                switch result {
                case .closed: break loop
                case .timeout: continue
                case let .datagram(length, from):
                    let bytes = Array(buffer[..<length])
                    guard let opened = try? node.datagramOpener.current.open(bytes) else {
                        _ = node.counters.droppedDatagrams.wrappingAdd(1, ordering: .relaxed)
                        continue
                    }
                    if case .swim = opened.payload.content { node.counters.addDatagramReceived(.gossip, bytes: length) } else { node.counters.addDatagramReceived(.messages, bytes: length) }
                    if case .dropped = feed.yield((opened, hostPort(from))) {
                        _ = node.counters.droppedDatagrams.wrappingAdd(1, ordering: .relaxed)
                    }
                }
            }
            feed.finish()
        }
        receiver.name = "huddle-udp-receive"
        receiver.start()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                while let batch = await node.datagramOutbox.takeAll() {
                    for envelope in batch {
                        let sent = envelope.data.withUnsafeReadableBytes { socket.send($0, to: envelope.remoteAddress) }
                        if !sent { _ = node.counters.datagramSendErrors.wrappingAdd(1, ordering: .relaxed) }
                    }
                }
                socket.close()
            }
            for await (datagram, source) in inbound {
                await node.datagramReceived(datagram, from: source)
            }
            node.datagramOutbox.close()
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
