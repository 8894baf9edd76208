import NIOCore
import NIOHTTP1
import NIOPosix

/// The HTTP listener of `huddle run --metrics HOST:PORT`: `GET /metrics` answers the node's
/// series in Prometheus text format; every other request gets 404. Plain HTTP, no
/// authentication: it belongs on loopback (or behind whatever guards the host's scrapers).
struct MetricsServer: Sendable {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
    let channel: NIOAsyncChannel<Connection, Never>
    /// The address it listens on, with the port the kernel chose for port 0.
    let address: String

    /// Binds `host:port`; a failure is one line naming the address.
    static func bind(host: String, port: Int) async throws -> MetricsServer {
        let channel: NIOAsyncChannel<Connection, Never>
        do {
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port) { child in
                    child.eventLoop.makeCompletedFuture {
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
                node.spawner.spawn { await Self.serve(connection, node: node, metrics: metrics) }
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
