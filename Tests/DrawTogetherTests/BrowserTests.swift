import Foundation
import HuddleTestSupport
import Testing

/// The repository, from this file's path.
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// What the browser test runs with: `$HUDDLE_BROWSER_PYTHON` (else `.build/browser-venv/bin/python`),
/// `$HUDDLE_CHROMIUM`, `$HUDDLE_CHROMEDRIVER` (else Debian's paths), and the `huddle` and
/// `drawtogether` of this build (`BuiltExecutables`).
private struct BrowserTools {
    let python: String
    let chromium: String
    let chromedriver: String
    let binaries: String

    /// The tools, or what is missing and how to get it.
    static func find() -> Result<BrowserTools, Missing> {
        let env = ProcessInfo.processInfo.environment
        func pick(_ key: String, _ fallback: String) -> String { env[key].flatMap { $0.isEmpty ? nil : $0 } ?? fallback }
        let python = pick("HUDDLE_BROWSER_PYTHON", repositoryRoot.appendingPathComponent(".build/browser-venv/bin/python").path)
        let chromium = pick("HUDDLE_CHROMIUM", "/usr/bin/chromium")
        let chromedriver = pick("HUDDLE_CHROMEDRIVER", "/usr/bin/chromedriver")
        let huddle = BuiltExecutables.path("huddle")
        let binaries = BuiltExecutables.directory
        var missing: [String] = []
        for (what, path) in [("python (HUDDLE_BROWSER_PYTHON)", python), ("chromium (HUDDLE_CHROMIUM)", chromium),
                             ("chromedriver (HUDDLE_CHROMEDRIVER)", chromedriver), ("huddle", huddle),
                             ("drawtogether", "\(binaries)/drawtogether")] where !FileManager.default.isExecutableFile(atPath: path) {
            missing.append("\(what) at \(path)")
        }
        if missing.isEmpty { return .success(BrowserTools(python: python, chromium: chromium, chromedriver: chromedriver, binaries: binaries)) }
        return .failure(Missing(description: missing.joined(separator: ", ")))
    }

    struct Missing: Error, CustomStringConvertible { let description: String }
}

@Suite("DrawTogether in real browsers", .timeLimit(.minutes(10)))
struct BrowserTests {
    /// Tests/browser/drawtogether_browser.py: two pages on two nodes, a stroke drawn with pointer
    /// events on one shows on the other (model and pixels), and back; a dropped image; a third page
    /// on a node that joined late shows both strokes and the image; a reset clears all three. Then
    /// (issue 38): the canvas comes once and changes after it; a pointer shows on the other page at
    /// 20 Hz at most; an image chosen with the file picker shows fitted with its aspect ratio; a
    /// text file is refused with a message; a page of another origin cannot open /ws or add an
    /// image; a killed participant's pointer goes.
    @Test func twoPagesDrawTogetherALatePageCatchesUpAndResetClearsAll() async throws {
        let tools: BrowserTools
        switch BrowserTools.find() {
        case let .success(found): tools = found
        case let .failure(missing):
            Issue.record("""
                BROWSER TEST CANNOT RUN: missing \(missing). Run `make test` (scripts/browser-venv.sh installs \
                chromium and chromium-driver with apt and makes .build/browser-venv with selenium and pillow), or set \
                HUDDLE_BROWSER_PYTHON, HUDDLE_CHROMIUM, HUDDLE_CHROMEDRIVER.
                """)
            return
        }
        let out = repositoryRoot.appendingPathComponent(".build/browser").path
        let log = "\(NSTemporaryDirectory())/drawtogether-browser-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: log) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tools.python)
        process.arguments = [repositoryRoot.appendingPathComponent("Tests/browser/drawtogether_browser.py").path,
                             "--bin", tools.binaries, "--out", out, "--chromium", tools.chromium, "--chromedriver", tools.chromedriver]
        let handle = try #require(FileHandle(forWritingAtPath: log))
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try TestProcesses.launch(process)
        let deadline = ContinuousClock.now + .seconds(540)
        while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(200)) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            Issue.record("the browser test did not finish in 540 s")
        }
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(process.terminationStatus == 0, "drawtogether_browser.py failed:\n\(output)")
        #expect(output.contains("PASS: DrawTogether in three browsers"))
        let screenshots = output.split(separator: "\n").filter { $0.hasPrefix("screenshot: ") }
        #expect(screenshots.count >= 5, "screenshots: \(screenshots)")
        for line in screenshots {
            let path = String(line.dropFirst("screenshot: ".count))
            #expect(FileManager.default.fileExists(atPath: path), "\(path)")
            print("DrawTogether browser test \(line)")
        }
    }
}
