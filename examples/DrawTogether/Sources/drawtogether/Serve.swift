import ArgumentParser
import DrawTogetherKit
import Foundation
import HuddleKit
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore

/// `drawtogether serve`: this participant's canvas as a web page, drawn on with a pointer.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve this participant's canvas as a web page (http://HOST:PORT/) until SIGINT/SIGTERM.",
        discussion: """
            The page draws strokes with the mouse, a pen or a finger, in this participant's color; drops \
            an image where it is dropped (an attachment in the session's journal); resets the canvas for \
            everyone; lists the participants. Changes reach the page over a WebSocket. Nothing is fetched \
            from the internet. With port 0 a free port is taken; the URL is printed either way. \
            The URL holds a secret token made for this run: only a browser that opened it may use the \
            page (other sites' requests, and other host names pointing here, are refused).
            """
    )

    @OptionGroup var control: ControlOption
    @Option(help: "Address of the web page, HOST:PORT (loopback unless you mean to share it).") var http = "127.0.0.1:8080"
    @Option(help: "This participant's color, #rrggbb (default: a random one).") var color: String?

    func validate() throws {
        guard Self.address(http) != nil else { throw ValidationError("--http must be HOST:PORT, got \(http)") }
        if let color, !ScriptStep.isColor(color) { throw ValidationError("--color must be #rrggbb, got \(color)") }
    }

    static func address(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { return nil }
        let host = String(text[..<colon])
        return host.isEmpty ? nil : (host, port)
    }

    func run() async throws {
        guard let (host, port) = Self.address(http) else { return }
        let canvas = color.map { Canvas(strokeColor: $0.lowercased()) } ?? Canvas()
        let session = try await control.connect(replayingHistory: true)
        do { try await canvas.configureGroupSession(session) } catch {
            throw DrawError("cannot join the session: \(error)")
        }
        let access = WebAccess(servedHost: host)
        let app = Application(
            router: Self.pageRouter(canvas, access: access),
            server: .http1WebSocketUpgrade(webSocketRouter: Self.socketRouter(canvas, access: access)),
            configuration: .init(address: .hostname(host, port: port), serverName: "drawtogether"),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                let shown = host.contains(":") ? "[\(host)]" : host
                FileHandle.standardOutput.write(Data("drawtogether: serving http://\(shown):\(bound)/?token=\(access.token) (color \(canvas.strokeColor)); Ctrl-C to stop\n".utf8))
            },
            logger: Self.quietLogger()
        )
        try await app.runService()
        await canvas.disconnect()
    }

    /// The page, its state, images, and image drops.
    static func pageRouter(_ canvas: Canvas, access: WebAccess) -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: WebAccessMiddleware(access: access))
        // The page's own script and style only (by a per-launch nonce), connections to this server only.
        let nonce = WebAccess.newToken()
        let page = WebPage.html.replacingOccurrences(of: "<script>", with: "<script nonce=\"\(nonce)\">")
            .replacingOccurrences(of: "<style>", with: "<style nonce=\"\(nonce)\">")
        let policy = "default-src 'none'; script-src 'nonce-\(nonce)'; style-src 'nonce-\(nonce)'; img-src 'self' blob:; "
            + "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
        router.get("/") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store", .contentSecurityPolicy: policy],
                     body: .init(byteBuffer: ByteBuffer(string: page)))
        }
        router.get("/state") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: PageState(await canvas.pageView()).json)))
        }
        router.get("/attachment/:id") { _, context in
            let id = context.parameters.get("id") ?? ""
            guard let image = await canvas.images.first(where: { $0.id == id }), let format = image.format else { return Response(status: .notFound) }
            // A peer's file: shown by the page as an image, never run as a document of this origin
            // (an SVG opened directly would be): a download, in a sandbox with nothing allowed.
            return Response(status: .ok, headers: [.contentType: format.mediaType, .cacheControl: "private, max-age=86400",
                                                   .contentDisposition: "attachment", .contentSecurityPolicy: "default-src 'none'; sandbox"],
                            body: .init(byteBuffer: ByteBuffer(bytes: image.bytes)))
        }
        // An image dropped or picked on the page: POST /image?x=X&y=Y&name=N with the file as the
        // body. Its kind is read from its bytes (`ImageFormat`), whatever the browser said: anything
        // else is refused with 415 and one line the page shows.
        router.post("/image") { request, _ in
            guard let x = request.uri.queryParameters.get("x", as: Double.self), let y = request.uri.queryParameters.get("y", as: Double.self),
                  x.isFinite, y.isFinite else { return Response(status: .badRequest) }
            let name = request.uri.queryParameters.get("name", as: String.self) ?? "image"
            let body = try await request.body.collect(upTo: 100 << 20)
            let bytes = Data(buffer: body)
            guard ImageFormat.sniff(Array(bytes)) != nil else {
                return Response(status: .unsupportedMediaType, headers: [.contentType: "text/plain; charset=utf-8"],
                                body: .init(byteBuffer: ByteBuffer(string: "\(name) is not an image (\(ImageFormat.accepted))")))
            }
            do {
                try await canvas.dropImage(bytes, at: Point(x: x, y: y), name: name)
            } catch {
                return Response(status: .unprocessableContent, headers: [.contentType: "text/plain; charset=utf-8"],
                                body: .init(byteBuffer: ByteBuffer(string: "\(error)")))
            }
            return Response(status: .ok)
        }
        return router
    }

    /// `/ws`: a snapshot of the canvas when it opens, then only what changed (`PageFeed`), one
    /// batch per change (a burst coalesces); from the page, its stroke points, its pointer and resets.
    static func socketRouter(_ canvas: Canvas, access: WebAccess) -> Router<BasicWebSocketRequestContext> {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.add(middleware: WebAccessMiddleware(access: access))
        router.ws("/ws") { inbound, outbound, _ in
            let push = Task {
                var feed = PageFeed()
                for await _ in await canvas.updates() {
                    let batch = feed.update(to: await canvas.pageView())
                    if !batch.isEmpty {
                        do { try await outbound.write(.text(PageMessage.json(batch))) } catch { return }
                    }
                    try? await Task.sleep(for: .milliseconds(20))  // lets a burst of changes coalesce
                }
            }
            defer {
                push.cancel()
                Task { await canvas.moveCursor(nil) }  // the page is gone: so is its pointer
            }
            for try await message in inbound.messages(maxSize: 1 << 16) {
                guard case let .text(text) = message, let command = try? JSONDecoder().decode(PageCommand.self, from: Data(text.utf8)) else { continue }
                switch command.op {
                case "point":
                    guard let stroke = command.stroke, let x = command.x, let y = command.y, x.isFinite, y.isFinite else { continue }
                    try? await canvas.addPoint(Point(x: x, y: y), toStroke: stroke)
                case "cursor":
                    // Without x and y: the pointer left the canvas.
                    let point = command.x.flatMap { x in command.y.map { Point(x: x, y: $0) } }
                    guard point.map({ $0.x.isFinite && $0.y.isFinite }) ?? true else { continue }
                    await canvas.moveCursor(point)
                case "reset":
                    try? await canvas.reset()
                default:
                    continue
                }
            }
        }
        return router
    }

    static func quietLogger() -> Logger {
        var logger = Logger(label: "drawtogether")
        logger.logLevel = .warning
        return logger
    }
}
