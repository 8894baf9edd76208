import DrawTogetherKit
import Foundation
import HuddleControl

/// A DrawTogether participant attached to one Huddle node through its control socket.
///
/// It rebuilds the canvas from the node's event stream (replaying every retained event first, so
/// it sees what the node saw before it started, catch-ups included), sends strokes as reliable
/// broadcasts, answers each member that joins later with a directed catch-up of the current
/// canvas, and shows the attachments whose metadata places them on the current canvas.
actor Participant {
    let control: String
    private let requests: ControlClient
    private var events: ControlClient?
    private(set) var model = CanvasModel()
    private var me = ""
    /// Events up to this cursor are replayed history: they update the canvas but trigger nothing.
    private var replayedUpTo: Int64 = 0
    private var replayDone = false
    private var eventTask: Task<Void, Never>?
    private let imageDir: String
    private var fetched: [String: CanvasImage] = [:]
    var color: String
    /// Catch-up parts sent to late joiners.
    private(set) var catchUpsSent = 0

    private init(control: String, requests: ControlClient, imageDir: String, color: String) {
        self.control = control
        self.requests = requests
        self.imageDir = imageDir
        self.color = color
    }

    static func connect(control: String) async throws -> Participant {
        let requests = try await ControlClient.connect(path: control)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("drawtogether-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let palette = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324", "#800000", "#000075"]
        return Participant(control: control, requests: requests, imageDir: dir, color: palette.randomElement() ?? "#000000")
    }

    /// Subscribes from the start of the node's retained history and waits until that history has
    /// been applied; then keeps following live events in the background.
    func start() async throws {
        me = try await requests.request("status")["member"]?.stringValue ?? ""
        let client = try await ControlClient.connect(path: control)
        events = client
        let reply = try await client.request("subscribe", ["since": 0])
        replayedUpTo = reply["cursor"]?.intValue ?? 0
        if replayedUpTo == 0 { replayDone = true }
        let stream = await client.events()
        eventTask = Task {
            do {
                for try await event in stream { await self.handle(event) }
            } catch {}
            self.eventsEnded()
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while !replayDone && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        // The session activity names the current canvas; the replay may have ended before it.
        model.setActivity(try await requests.request("activity.get")["activity"])
    }

    private var streamEnded = false
    private func eventsEnded() { streamEnded = true; replayDone = true }

    private func handle(_ event: JSONObject) async {
        let cursor = event["cursor"]?.intValue ?? 0
        let live = cursor > replayedUpTo
        switch event["event"]?.stringValue {
        case "message":
            if let text = event["text"]?.stringValue { model.apply(text: text) }
        case "activity":
            model.setActivity(event["activity"])
        case "member":
            if live, event["change"]?.stringValue == "joined",
               let member = event["member"]?.objectValue?["member"]?.stringValue, member != me {
                await sendCatchUp(to: member)
            }
        default:
            break
        }
        if cursor >= replayedUpTo { replayDone = true }
    }

    /// The current canvas, in parts, to `member` only.
    private func sendCatchUp(to member: String) async {
        for part in model.catchUp() {
            do {
                _ = try await requests.request("send", ["text": .string(part.text), "to": [.string(member)]])
                catchUpsSent += 1
            } catch {
                FileHandle.standardError.write(Data("drawtogether: catch-up to \(member) failed: \(error)\n".utf8))
            }
        }
    }

    // MARK: drawing

    func draw(_ points: [Point]) async throws {
        let id = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        for (index, point) in points.enumerated() {
            let message = DrawMessage.upsertStroke(canvas: model.current, id: id, color: color, index: index, point: point)
            _ = try await requests.request("send", ["text": .string(message.text)])
        }
    }

    func dropImage(path: String, at point: Point) async throws {
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        _ = try await requests.request("attach.add", ["path": .string(absolute),
                                                      "meta": ["location": [.double(point.x), .double(point.y)], "canvas": .string(model.current)]])
    }

    /// A fresh canvas for everyone: a new activity value; the old canvas's images are removed.
    func reset() async throws {
        let old = model.current
        let canvas = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        _ = try await requests.request("activity.set", ["value": CanvasModel.activity(canvas: canvas)])
        for attachment in try await attachments() where Self.canvas(of: attachment) == old {
            if let id = attachment["id"]?.stringValue { _ = try? await requests.request("attach.remove", ["id": .string(id)]) }
        }
        while model.current != canvas { try await Task.sleep(for: .milliseconds(10)) }
    }

    func aliveMembers() async throws -> Int {
        let list = try await requests.request("members")["members"]?.arrayValue ?? []
        return list.filter { $0.objectValue?["state"]?.stringValue == "alive" }.count
    }

    // MARK: images

    private func attachments() async throws -> [JSONObject] {
        (try await requests.request("attach.list")["attachments"]?.arrayValue ?? []).compactMap(\.objectValue)
    }

    private static func canvas(of attachment: JSONObject) -> String {
        attachment["meta"]?.objectValue?["canvas"]?.stringValue ?? ""
    }

    /// The images on the current canvas that this node has (or, with `waitMilliseconds`, gets
    /// within that time); attachments that are unavailable are left out.
    func images(waitMilliseconds: Int = 0) async throws -> [CanvasImage] {
        var shown: [CanvasImage] = []
        for attachment in try await attachments() {
            guard attachment["state"]?.stringValue != "removed", Self.canvas(of: attachment) == model.current,
                  let id = attachment["id"]?.stringValue,
                  let location = attachment["meta"]?.objectValue?["location"]?.arrayValue, location.count == 2,
                  let x = Self.number(location[0]), let y = Self.number(location[1]) else { continue }
            if let image = fetched[id] { shown.append(image); continue }
            if waitMilliseconds == 0 && attachment["complete"]?.boolValue != true { continue }
            let path = "\(imageDir)/\(id)"
            var fields: JSONObject = ["id": .string(id), "path": .string(path)]
            if waitMilliseconds > 0 { fields["timeout_ms"] = .int(Int64(waitMilliseconds)) }
            guard (try? await requests.request("attach.get", fields)) != nil,
                  let data = FileManager.default.contents(atPath: path) else { continue }
            let image = CanvasImage(id: id, location: Point(x: x, y: y), bytes: Array(data))
            fetched[id] = image
            shown.append(image)
        }
        return shown
    }

    private static func number(_ json: JSON) -> Double? {
        switch json {
        case let .double(d): d
        case let .int(i): Double(i)
        default: nil
        }
    }

    // MARK: output

    /// Writes the SVG of the current canvas (temporary file + rename) and returns a summary line.
    func render(to path: String, waitForImagesMilliseconds: Int = 0) async throws -> String {
        let images = try await images(waitMilliseconds: waitForImagesMilliseconds)
        let svg = SVGRenderer.render(model, images: images)
        let temporary = path + ".tmp-\(getpid())"
        try Data(svg.utf8).write(to: URL(fileURLWithPath: temporary))
        if rename(temporary, path) != 0 { throw DrawError("cannot write \(path): \(String(cString: strerror(errno)))") }
        let canvas = model.current.isEmpty ? "the first canvas" : "canvas \(model.current)"
        return "\(path): \(canvas), \(model.strokes.count) strokes, \(model.pointCount) points, \(images.count) image\(images.count == 1 ? "" : "s")"
            + (model.ignored > 0 ? " (\(model.ignored) messages ignored: newer version or not DrawTogether)" : "")
    }

    func leaveSession() async throws {
        _ = try await requests.request("leave")
    }

    func close() async {
        eventTask?.cancel()
        await events?.close()
        await requests.close()
        try? FileManager.default.removeItem(atPath: imageDir)
    }
}

/// One clear line for the user.
struct DrawError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Participant {
    func setColor(_ c: String) { color = c }
}
