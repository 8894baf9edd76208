import ArgumentParser
import DrawTogetherKit
import Foundation
import HuddleKit

/// `drawtogether`: Apple's DrawTogether sample (a shared canvas) on a Huddle session, through HuddleKit.
@main
struct DrawTogetherCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "drawtogether",
        abstract: "A shared canvas that every member of a Huddle session draws on.",
        discussion: """
            Each participant drives one running Huddle node through its control socket: strokes are \
            reliable, causally ordered messages; participants who join later get the canvas from the others \
            (a directed catch-up); images are attachments in the journal that stay on the canvas after their \
            uploader left; a reset starts a fresh canvas for everyone (a new activity value). \
            `serve` is the canvas in a browser.
            """,
        subcommands: [ServeCommand.self, ScriptCommand.self, RenderCommand.self]
    )
}

struct ControlOption: ParsableArguments {
    @Option(help: "Control socket of this participant's node (default: $HUDDLE_CONTROL, else $XDG_RUNTIME_DIR/huddle.sock, else /tmp/huddle-$UID.sock).")
    var control: String?

    /// The session on this participant's node, with one clear line when there is no node.
    func connect(replayingHistory: Bool) async throws -> GroupSession<DrawTogether> {
        do { return try await GroupSession<DrawTogether>.connect(control: control, replayingHistory: replayingHistory) } catch {
            throw DrawError("\(error) (start one with `huddle run`, or pass --control)")
        }
    }
}

/// Runs a participant that plays a script of strokes, images and waits.
struct ScriptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "script",
        abstract: "Join the canvas as a participant and play FILE (strokes, images, waits, render, leave/stay).",
        discussion: """
            One step per line: color #rrggbb | stroke X,Y X,Y ... | image PATH X,Y | reset | \
            wait members N | wait points N | wait images N | sleep MS | render OUT.svg | leave | stay. \
            Without `leave` or `stay` the participant exits after the last step (its node stays in the session). \
            `stay` keeps answering late joiners until SIGINT/SIGTERM.
            """
    )

    @Argument(help: "The script file.") var file: String
    @OptionGroup var control: ControlOption
    @Option(help: "Give up on a `wait` step after this many seconds.") var waitTimeout: Double = 120

    func run() async throws {
        let text: String
        do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
            throw DrawError("cannot read script \(file): \(error.localizedDescription)")
        }
        let steps: [ScriptStep]
        do { steps = try ScriptStep.parse(text) } catch { throw DrawError("\(file): \(error)") }
        // A script's color is its first `color` step, else a random one.
        let color = steps.lazy.compactMap { if case let .color(c) = $0 { c } else { nil } }.first
        let canvas = color.map { Canvas(strokeColor: $0) } ?? Canvas()
        let session = try await control.connect(replayingHistory: true)
        do {
            try await canvas.configureGroupSession(session)
            for step in steps {
                if try await perform(step, canvas) == false { break }
            }
        } catch {
            await canvas.disconnect()
            throw error
        }
        await canvas.disconnect()
    }

    /// false when the script is over (`leave`, `stay`).
    private func perform(_ step: ScriptStep, _ canvas: Canvas) async throws -> Bool {
        switch step {
        case .color: break  // taken when the canvas was made
        case let .stroke(points): try await canvas.draw(points)
        case let .image(path, at): try await canvas.dropImage(contentsOf: URL(fileURLWithPath: path), at: at)
        case .reset: try await canvas.reset()
        case let .waitMembers(n): try await wait("\(n) participants") { await canvas.activeParticipants.count >= n }
        case let .waitPoints(n): try await wait("\(n) points on the canvas") { await canvas.model.pointCount >= n }
        case let .waitImages(n): try await wait("\(n) images on the canvas") { await canvas.images.count >= n }
        case let .sleep(ms): try await Task.sleep(for: .milliseconds(ms))
        case let .render(path): print("drawtogether: wrote " + (try await write(canvas, to: path)))
        case .leave:
            try await canvas.leave()
            return false
        case .stay:
            await waitForTermination()
            return false
        }
        return true
    }

    private func wait(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(waitTimeout)
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw DrawError("gave up after \(Int(waitTimeout)) s waiting for \(what)")
    }
}

/// Writes what the canvas of the node's participant shows, from the node's retained events.
struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Write OUT.svg: the canvas as this node has seen it (strokes, catch-ups, images), then exit."
    )

    @Argument(help: "Output SVG file.") var out: String
    @OptionGroup var control: ControlOption
    @Option(help: "How long to wait for images that are still being fetched, in milliseconds.") var imageTimeoutMs: Int = 30_000

    func run() async throws {
        let canvas = Canvas(answersNewcomers: false)
        let session = try await control.connect(replayingHistory: true)
        do {
            try await canvas.configureGroupSession(session)
            try await settle(canvas)
            print("drawtogether: wrote " + (try await write(canvas, to: out)))
        } catch {
            await canvas.disconnect()
            throw error
        }
        await canvas.disconnect()
    }

    /// Waits until the replayed history is applied and the images are loaded: nothing shown has
    /// changed for 500 ms and no image is loading, or `imageTimeoutMs` passed.
    private func settle(_ canvas: Canvas) async throws {
        let deadline = ContinuousClock.now + .milliseconds(imageTimeoutMs)
        var last = (-1, -1, -1), quiet = 0
        while ContinuousClock.now < deadline {
            let now = (await canvas.model.pointCount, await canvas.model.strokes.count, await canvas.images.count)
            let loading = await canvas.isLoadingImages
            quiet = now == last && !loading ? quiet + 1 : 0
            if quiet >= 10 { return }
            last = now
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// Writes the SVG of the current canvas (temporary file + rename) and returns a summary line.
func write(_ canvas: Canvas, to path: String) async throws -> String {
    let svg = await canvas.svg()
    let model = await canvas.model
    let images = await canvas.images
    let temporary = path + ".tmp-\(getpid())"
    try Data(svg.utf8).write(to: URL(fileURLWithPath: temporary))
    if rename(temporary, path) != 0 { throw DrawError("cannot write \(path): \(String(cString: strerror(errno)))") }
    let name = model.current.isEmpty ? "the first canvas" : "canvas \(model.current)"
    return "\(path): \(name), \(model.strokes.count) strokes, \(model.pointCount) points, \(images.count) image\(images.count == 1 ? "" : "s")"
}

/// One clear line for the user.
struct DrawError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Returns on SIGINT or SIGTERM.
func waitForTermination() async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        let fired = Fired()
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .main)
            source.setEventHandler { if fired.first() { done.resume() } }
            source.resume()
            fired.keep(source)
        }
    }
}

/// Resumes a continuation once, whichever signal comes first.
private final class Fired: @unchecked Sendable {
    // @unchecked: both fields are only touched while holding `lock`.
    private let lock = NSLock()
    private var done = false
    private var sources: [DispatchSourceSignal] = []
    func first() -> Bool { lock.lock(); defer { lock.unlock() }; if done { return false }; done = true; return true }
    func keep(_ s: DispatchSourceSignal) { lock.lock(); sources.append(s); lock.unlock() }
}
