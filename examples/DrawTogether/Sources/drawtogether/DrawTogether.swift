import ArgumentParser
import DrawTogetherKit
import Foundation
import HuddleControl

/// `drawtogether`: Apple's DrawTogether sample (a shared canvas) on a Huddle session.
@main
struct DrawTogether: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "drawtogether",
        abstract: "A shared canvas that every member of a Huddle session draws on.",
        discussion: """
            Each participant drives one running Huddle node through its control socket: strokes are \
            reliable, causally ordered broadcasts; members who join later get the canvas from the others \
            (a directed catch-up); images are Huddle attachments that stay on the canvas after their \
            uploader left; `reset` starts a fresh canvas for everyone (the session activity).
            """,
        subcommands: [ScriptCommand.self, RenderCommand.self]
    )
}

struct ControlOption: ParsableArguments {
    @Option(help: "Control socket of this participant's node (default: $HUDDLE_CONTROL, else $XDG_RUNTIME_DIR/huddle.sock, else /tmp/huddle-$UID.sock).")
    var control: String?

    var path: String { ControlPath.resolve(control) }
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
        let participant = try await connect(control.path)
        do {
            try await participant.start()
            for step in steps {
                if try await perform(step, participant) == false { break }
            }
        } catch {
            await participant.close()
            throw error
        }
        await participant.close()
    }

    /// false when the script is over (`leave`, `stay`).
    private func perform(_ step: ScriptStep, _ p: Participant) async throws -> Bool {
        switch step {
        case let .color(c): await p.setColor(c)
        case let .stroke(points): try await p.draw(points)
        case let .image(path, at): try await p.dropImage(path: path, at: at)
        case .reset: try await p.reset()
        case let .waitMembers(n): try await wait("\(n) alive members") { try await p.aliveMembers() >= n }
        case let .waitPoints(n): try await wait("\(n) points on the canvas") { await p.model.pointCount >= n }
        case let .waitImages(n): try await wait("\(n) images on the canvas") { try await p.images().count >= n }
        case let .sleep(ms): try await Task.sleep(for: .milliseconds(ms))
        case let .render(path): print("drawtogether: wrote " + (try await p.render(to: path)))
        case .leave:
            try await p.leaveSession()
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
        let participant = try await connect(control.path)
        do {
            try await participant.start()
            print("drawtogether: wrote " + (try await participant.render(to: out, waitForImagesMilliseconds: imageTimeoutMs)))
        } catch {
            await participant.close()
            throw error
        }
        await participant.close()
    }
}

private func connect(_ path: String) async throws -> Participant {
    do { return try await Participant.connect(control: path) } catch {
        throw DrawError("cannot reach a Huddle node at \(path): \(error) (start one with `huddle run`, or pass --control)")
    }
}

/// Returns on SIGINT or SIGTERM.
private func waitForTermination() async {
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
