import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The HTTP listener of `huddle run --metrics HOST:PORT`: `GET /metrics` answers the node's
/// series in Prometheus text format; every other request gets 404. Plain HTTP, no
/// authentication: it belongs on loopback (or behind whatever guards the host's scrapers).
/// Bounded: at most `maximumConnections` at once (more are closed unread), and a connection
/// that sends nothing for `idleTimeout` is closed.
struct MetricsServer: Sendable {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
    let channel: NIOAsyncChannel<Connection, Never>
    /// The address it listens on, with the port the kernel chose for port 0.
    let address: String
    private let open = OpenConnections()

    static let maximumConnections = 16
    static let idleTimeout = TimeAmount.seconds(60)

    /// Connections being served now.
    private final class OpenConnections: Sendable {
        let count = Atomic<Int>(0)
    }

    /// Binds `host:port`; a failure is one line naming the address.
    static func bind(host: String, port: Int) async throws -> MetricsServer {
        let channel: NIOAsyncChannel<Connection, Never>
        do {
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port) { child in
                    child.eventLoop.makeCompletedFuture {
                        try child.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                        try child.pipeline.syncOperations.addHandler(CloseWhenIdle())
                        try child.pipeline.syncOperations.configureHTTPServerPipeline()
                        return try Connection(wrappingChannelSynchronously: child)
                    }
                }
        } catch {
            throw NodeError("cannot serve metrics on \(host):\(port) (TCP): \(error)")
        }
        let bound = channel.channel.localAddress
        let shown = bound.flatMap { address in address.ipAddress.map { ip in
            if case .v6 = address { return "[\(ip)]" }
            return ip
        } } ?? host
        return MetricsServer(channel: channel, address: "\(shown):\(bound?.port ?? port)")
    }

    /// Serves scrapes until the listener closes.
    func run(_ node: Node, metrics: NodeMetrics) async {
        try? await channel.executeThenClose { inbound in
            for try await connection in inbound {
                guard open.count.add(1, ordering: .relaxed).newValue <= Self.maximumConnections else {
                    open.count.subtract(1, ordering: .relaxed)
                    // Closed unread; executeThenClose finishes the writer, as NIO requires.
                    node.spawner.spawn { try? await connection.executeThenClose { _, _ in } }
                    continue
                }
                node.spawner.spawn { [open] in
                    await Self.serve(connection, node: node, metrics: metrics)
                    open.count.subtract(1, ordering: .relaxed)
                }
            }
        }
    }

    func close() { channel.channel.close(promise: nil) }

    /// Answers the requests of one connection (keep-alive, as Prometheus scrapes).
    private static func serve(_ connection: Connection, node: Node, metrics: NodeMetrics) async {
        try? await connection.executeThenClose { input, output in
            var request: HTTPRequestHead?
            for try await part in input {
                switch part {
                case let .head(head): request = head
                case .body: break
                case .end:
                    guard let head = request else { return }
                    request = nil
                    let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                    let status: HTTPResponseStatus, body: [UInt8], type: String
                    if path == "/metrics" && (head.method == .GET || head.method == .HEAD) {
                        status = .ok
                        body = metrics.render(await node.metricsSnapshot())
                        type = "text/plain; version=0.0.4; charset=utf-8"
                    } else {
                        status = .notFound
                        body = Array("huddle serves GET /metrics only\n".utf8)
                        type = "text/plain; charset=utf-8"
                    }
                    var headers = HTTPHeaders()
                    headers.add(name: "Content-Type", value: type)
                    headers.add(name: "Content-Length", value: "\(body.count)")
                    if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
                    try await output.write(.head(HTTPResponseHead(version: head.version, status: status, headers: headers)))
                    if head.method != .HEAD { try await output.write(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
                    try await output.write(.end(nil))
                    if !head.isKeepAlive { return }
                }
            }
        }
    }
}

/// Closes a connection when `IdleStateHandler` says it sent nothing for its timeout.
private final class CloseWhenIdle: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
