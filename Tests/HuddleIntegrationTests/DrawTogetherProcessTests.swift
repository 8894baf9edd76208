import Foundation
import HuddleTestSupport
import HuddleControl
import Testing

/// The `drawtogether` executable next to the `huddle` under test.
private let drawTogetherBinary = URL(fileURLWithPath: huddleBinary).deletingLastPathComponent().appendingPathComponent("drawtogether").path

/// A `drawtogether` process with its output in a file.
private final class DrawProcess: @unchecked Sendable {
    // @unchecked: set once in init; `Process` is thread-safe for the calls made here.
    let process = Process()
    let outputPath: String

    init(_ arguments: [String], output: String) throws {
        outputPath = output
        process.executableURL = URL(fileURLWithPath: drawTogetherBinary)
        process.arguments = arguments
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let handle = FileHandle(forWritingAtPath: output)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try TestProcesses.launch(process)
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    func waitForExit(within seconds: Double) async throws -> Int32 {
        try await eventually("drawtogether \(process.arguments?.first ?? "") to exit", within: seconds) { !process.isRunning }
        return process.terminationStatus
    }
}

@Suite("DrawTogether example", .timeLimit(.minutes(10)))
struct DrawTogetherProcessTests {
    /// Three participants draw concurrently; one of them drops an image and leaves; a fourth joins
    /// late and draws too. Every remaining participant renders the same SVG bytes, with every
    /// stroke and the image.
    @Test func everyParticipantRendersTheSameCanvasIncludingALateJoinerAndAnImageWhoseUploaderLeft() async throws {
        let cluster = try TestCluster("draw")
        var participants: [DrawProcess] = []
        defer {
            for p in participants where p.process.isRunning { p.process.terminate() }
            cluster.shutdown()
        }
        let names = ["alice", "bob", "carol"]
        var nodes: [TestNode] = []
        for name in names { nodes.append(try await cluster.start(name)) }
        try await cluster.waitForFullMesh(3)

        let strokesEach = 3, pointsEach = 12
        let early = names.count * strokesEach * pointsEach
        func strokes(_ k: Int, count: Int) -> String {
            (0..<count).map { s in
                "stroke " + (0..<pointsEach).map { i in "\(100 + 250 * k + 10 * i),\(100 + 150 * s + 5 * i)" }.joined(separator: " ")
            }.joined(separator: "\n")
        }
        // A PNG header (40×30) and a body: enough for the canvas, which embeds the bytes as they are.
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 40, 0, 0, 0, 30]
        png += (0..<4000).map { _ in UInt8.random(in: 0...255) }
        let imagePath = "\(cluster.dir)/photo.png"
        try Data(png).write(to: URL(fileURLWithPath: imagePath))

        for (k, name) in names.enumerated() {
            let ending = name == "carol"
                ? "image \(imagePath) 500,350\nwait images 1\nwait points \(early)\nleave"
                : "wait points \(early)\nstay"
            let script = "# \(name)\ncolor #\(["e6194b", "3cb44b", "4363d8"][k])\nwait members 3\n\(strokes(k, count: strokesEach))\n\(ending)\n"
            let path = "\(cluster.dir)/\(name).script"
            try script.write(toFile: path, atomically: true, encoding: .utf8)
            participants.append(try DrawProcess(["script", path, "--control", nodes[k].control], output: "\(cluster.dir)/\(name).draw.log"))
        }
        let carol = participants[2]
        let carolExit = try await carol.waitForExit(within: 120)
        #expect(carolExit == 0, "carol's participant: \(carol.output)")
        _ = try await nodes[2].waitForExit(within: 60)

        // dave joins after carol left: the canvas comes from alice and bob (directed catch-ups),
        // the image from whoever holds its chunks.
        let dave = try await cluster.start("dave")
        let daveScript = "wait points \(early)\nwait images 1\n\(strokes(3, count: 1))\nstay\n"
        try daveScript.write(toFile: "\(cluster.dir)/dave.script", atomically: true, encoding: .utf8)
        participants.append(try DrawProcess(["script", "\(cluster.dir)/dave.script", "--control", dave.control], output: "\(cluster.dir)/dave.draw.log"))

        let total = early + pointsEach
        let remaining = [nodes[0], nodes[1], dave]
        var svgs: [String] = []
        do {
            try await eventually("alice, bob and dave to render the same canvas with \(total) points and the image", within: 120) {
                svgs = []
                for node in remaining {
                    let out = "\(cluster.dir)/\(node.name).svg"
                    let render = try DrawProcess(["render", out, "--control", node.control], output: "\(cluster.dir)/\(node.name).render.log")
                    guard try await render.waitForExit(within: 60) == 0 else { return false }
                    svgs.append(try String(contentsOfFile: out, encoding: .utf8))
                }
                return Set(svgs).count == 1 && svgs[0].contains("\(total) points") && svgs[0].contains("<image")
            }
        } catch {
            let outputs = participants.map(\.output).joined(separator: "\n---\n")
            Issue.record("\(error)\nrenders: \(svgs.map { $0.split(separator: "\n").dropFirst().first ?? "" })\nparticipants:\n\(outputs)\n\(cluster.logs)")
            return
        }
        let svg = svgs[0]
        #expect(svg.components(separatedBy: "<polyline").count - 1 == names.count * strokesEach + 1, "every stroke is drawn")
        #expect(svg.contains(Data(png).base64EncodedString()), "the image carol dropped is on the canvas")
        for color in ["#e6194b", "#3cb44b", "#4363d8"] { #expect(svg.contains("stroke=\"\(color)\"")) }
        for p in participants where p.process.isRunning { p.process.terminate() }
        for p in participants where p !== carol {
            let code = try await p.waitForExit(within: 30)
            #expect(code == 0 || code == SIGTERM, "a participant failed: \(p.output)")
        }
    }
}

/// One HTTP/1.1 exchange over a plain TCP socket, with exactly the headers given (a browser's
/// `Host` and `Origin` are what the checks look at, and URLSession would set its own): the status
/// and the response headers, lowercased names.
private func rawHTTP(port: Int, _ method: String, _ path: String, headers: [(String, String)], body: [UInt8] = []) throws -> (status: Int, headers: [String: String]) {
    let fd = try loopbackTCPConnection(port: port, receiveTimeoutSeconds: 20)
    defer { close(fd) }
    var text = "\(method) \(path) HTTP/1.1\r\n"
    for (name, value) in headers { text += "\(name): \(value)\r\n" }
    text += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
    let request = Array(text.utf8) + body
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    var reply: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while !String(decoding: reply, as: UTF8.self).contains("\r\n\r\n") {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { break }
        reply += buffer.prefix(n)
    }
    let head = String(decoding: reply, as: UTF8.self).components(separatedBy: "\r\n\r\n").first ?? ""
    let lines = head.components(separatedBy: "\r\n")
    let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
    var fields: [String: String] = [:]
    for line in lines.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return (status, fields)
}

private struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension DrawTogetherProcessTests {
    /// Issue 38, item 5: the page `serve` serves is for the browser that opened the printed URL
    /// alone. Without its token, from another site (Origin), or through another host name pointing
    /// here (DNS rebinding), the page, its state, uploads and the WebSocket are refused with 403;
    /// with the token the page comes with a strict content security policy, `nosniff`, and a
    /// `SameSite=Strict` cookie that then carries the token. Before: anything that could reach
    /// 127.0.0.1 read the canvas, drew, reset and uploaded.
    @Test func thePageIsServedToTheBrowserWithItsTokenAlone() async throws {
        let cluster = try TestCluster("dtweb")
        let node = try await cluster.start("alice")
        let serve = try DrawProcess(["serve", "--control", node.control, "--http", "127.0.0.1:0", "--color", "#e6194b"],
                                    output: "\(cluster.dir)/serve.log")
        defer {
            if serve.process.isRunning { serve.process.terminate() }
            cluster.shutdown()
        }
        var url = ""
        try await eventually("serve to print its URL", within: 60) {
            guard let range = serve.output.range(of: #"http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{64}"#, options: .regularExpression) else { return false }
            url = String(serve.output[range])
            return true
        }
        let port = Int(url.split(separator: ":")[2].split(separator: "/")[0]) ?? 0
        let token = String(url.split(separator: "=")[1])
        let host = ("Host", "127.0.0.1:\(port)")

        let page = try rawHTTP(port: port, "GET", "/?token=\(token)", headers: [host])
        #expect(page.status == 200)
        let policy = page.headers["content-security-policy"] ?? ""
        #expect(policy.contains("default-src 'none'") && policy.contains("script-src 'nonce-") && !policy.contains("unsafe"), "\(policy)")
        #expect(page.headers["x-content-type-options"] == "nosniff" && page.headers["referrer-policy"] == "no-referrer")
        let cookie = page.headers["set-cookie"] ?? ""
        #expect(cookie.contains("dt_token=\(token)") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "\(cookie)")
        #expect(try rawHTTP(port: port, "GET", "/state", headers: [host, ("Cookie", "dt_token=\(token)")]).status == 200, "the cookie carries the token")

        let upgrade = [("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]
        let refused: [(String, String, String, [(String, String)])] = [
            ("the page without its token", "GET", "/", [host]),
            ("the page with a wrong token", "GET", "/?token=\(String(repeating: "0", count: 64))", [host]),
            ("the state without the token", "GET", "/state", [host]),
            ("an upload without the token", "POST", "/image?x=1&y=1&name=a.png", [host]),
            ("the WebSocket without the token", "GET", "/ws", [host] + upgrade),
            ("the WebSocket from another site", "GET", "/ws", [host, ("Origin", "http://evil.example"), ("Cookie", "dt_token=\(token)")] + upgrade),
            ("a reset posted from another site", "POST", "/image?x=1&y=1&name=a.png", [host, ("Origin", "http://evil.example"), ("Cookie", "dt_token=\(token)")]),
            ("another host name pointing here", "GET", "/state", [("Host", "rebind.evil.example:\(port)"), ("Cookie", "dt_token=\(token)")]),
            // Another port of this host is the same site (the cookie goes along) but another origin.
            ("the WebSocket from another port of this host", "GET", "/ws", [host, ("Origin", "http://127.0.0.1:\(port == 65535 ? 1 : port + 1)"), ("Cookie", "dt_token=\(token)")] + upgrade),
            ("an upload from another port of this host", "POST", "/image?x=1&y=1&name=a.png", [host, ("Origin", "http://127.0.0.1:\(port == 65535 ? 1 : port + 1)"), ("Cookie", "dt_token=\(token)")]),
        ]
        for (what, method, path, headers) in refused {
            let reply = try rawHTTP(port: port, method, path, headers: headers, body: method == "POST" ? [1, 2, 3] : [])
            // A refused WebSocket upgrade is answered 400 by the upgrader (the route said 403); the
            // same upgrade with the token from the page's own origin is answered 101 (below).
            let upgrading = headers.contains { $0.0 == "Upgrade" }
            #expect(upgrading ? reply.status == 400 || reply.status == 403 : reply.status == 403, "\(what): \(reply.status)")
        }
        // The WebSocket with the token from the page's own origin is upgraded.
        let own = try rawHTTP(port: port, "GET", "/ws", headers: [host, ("Origin", "http://127.0.0.1:\(port)"), ("Cookie", "dt_token=\(token)")] + upgrade)
        #expect(own.status == 101, "the page's own WebSocket: \(own.status)")
        // An upload that is no image, whatever it is called, is refused by its bytes, with one line.
        let text = try rawHTTP(port: port, "POST", "/image?x=1&y=1&name=photo.png", headers: [host, ("Origin", "http://127.0.0.1:\(port)"), ("Cookie", "dt_token=\(token)")],
                               body: Array("just some text, not a PNG".utf8))
        #expect(text.status == 415, "a text file named .png: \(text.status)")
    }
}
