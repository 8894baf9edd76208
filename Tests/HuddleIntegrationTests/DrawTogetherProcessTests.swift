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
