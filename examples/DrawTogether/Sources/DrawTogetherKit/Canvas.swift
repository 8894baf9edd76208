import Foundation
import HuddleKit

/// DrawTogether's canvas on a group session, as the sample's `Canvas`: it configures the session
/// with a messenger and a journal, draws strokes point by point, catches newcomers up, shows the
/// images in the journal where they were dropped, and resets by setting a new activity value.
///
/// Guarantees: every stroke point this participant draws is applied here at once and sent to
/// everyone reliably; each participant that appears after this one joined gets the current canvas
/// (directed `CanvasMessage`s); images removed from the journal disappear; only images of an
/// accepted kind (`ImageFormat`) are dropped or shown; this participant's pointer goes to the others
/// unreliably, coalesced to 20 Hz (`CursorThrottle`), and theirs are shown while they are
/// participants and not stale (`CursorTable`); `updates` tells when anything shown changed.
public actor Canvas {
    /// The strokes, by canvas.
    public private(set) var model = CanvasModel()
    /// This participant's color.
    public nonisolated let strokeColor: String
    /// The session, once configured.
    public private(set) var groupSession: GroupSession<DrawTogether>?
    /// Catch-up parts sent to newcomers.
    public private(set) var catchUpsSent = 0
    private var messenger: GroupSessionMessenger?
    /// Pointers travel unreliably (datagrams).
    private var fast: GroupSessionMessenger?
    /// The other participants' pointers.
    var cursorTable = CursorTable()
    private var throttle = CursorThrottle()
    private var journal: GroupSessionJournal?
    private var tasks: [Task<Void, Never>] = []
    private let answersNewcomers: Bool
    /// Images loaded from the journal, by attachment id, with the canvas each was dropped on.
    private var loaded: [String: (image: CanvasImage, canvas: String)] = [:]
    private var listed: Set<String> = []
    private var loading: Set<String> = []
    /// The color each participant drew with last, by member id (this one's is `strokeColor`).
    public private(set) var colors: [String: String] = [:]
    private var watchers: [Int: AsyncStream<Void>.Continuation] = [:]
    private var nextWatcher = 0

    /// The colors a participant draws with; one is picked at random.
    public static let palette = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324", "#800000", "#000075"]

    /// A canvas drawing in `strokeColor`; with `answersNewcomers` false (a viewer such as
    /// `drawtogether render`), it sends no catch-ups.
    public init(strokeColor: String = Canvas.palette.randomElement() ?? "#000000", answersNewcomers: Bool = true) {
        self.strokeColor = strokeColor
        self.answersNewcomers = answersNewcomers
    }

    /// Sets up the messenger, the journal and the tasks that read them, then joins the session.
    public func configureGroupSession(_ groupSession: GroupSession<DrawTogether>) async throws(HuddleKitError) {
        self.groupSession = groupSession
        let messenger = GroupSessionMessenger(session: groupSession)
        self.messenger = messenger
        let journal = GroupSessionJournal(session: groupSession)
        self.journal = journal

        tasks.append(Task {
            for await (message, context) in messenger.messages(of: UpsertStrokeMessage.self) {
                self.colors[context.source.id] = message.color
                self.handle(message)
            }
        })
        tasks.append(Task {
            for await (message, _) in messenger.messages(of: CanvasMessage.self) { self.handle(message) }
        })
        let fast = GroupSessionMessenger(session: groupSession, deliveryMode: .unreliable)
        self.fast = fast
        tasks.append(Task {
            for await (message, context) in fast.messages(of: CursorMessage.self) {
                self.cursorTable.heard(context.source.id, at: message.point, now: .now)
                self.changed()
            }
        })
        tasks.append(Task {
            // Hides stale pointers, and repeats this participant's pointer while it stands still.
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                self.tick(now: .now)
            }
        })
        tasks.append(Task {
            for await activity in groupSession.activityUpdates { self.handle(activity) }
        })
        tasks.append(Task {
            // The first value is who was here when this participant joined; later ones hold newcomers.
            var previous: Set<Participant>?
            for await activeParticipants in groupSession.activeParticipantsUpdates {
                if let previous, self.answersNewcomers {
                    let newParticipants = activeParticipants.subtracting(previous)
                    if !newParticipants.isEmpty { await self.sendCatchUp(to: newParticipants) }
                }
                previous = activeParticipants
                self.changed()
            }
        })
        tasks.append(Task {
            for await attachments in journal.attachments { self.handle(attachments) }
        })
        try await groupSession.joinAndWait()
    }

    // MARK: what the session delivers

    func handle(_ message: UpsertStrokeMessage) {
        model.handle(message)
        changed()
    }

    func handle(_ message: CanvasMessage) {
        model.handle(message)
        changed()
    }

    func handle(_ activity: DrawTogether?) {
        model.setActivity(activity)
        changed()
    }

    /// Keeps the loaded images in step with the journal: new attachments are loaded in the
    /// background, removed ones leave the canvas.
    func handle(_ attachments: [Attachment]) {
        listed = Set(attachments.map(\.id))
        loaded = loaded.filter { listed.contains($0.key) }
        for attachment in attachments where loaded[attachment.id] == nil && !loading.contains(attachment.id) && attachment.state != .unavailable {
            loading.insert(attachment.id)
            Task { await self.load(attachment) }
        }
        changed()
    }

    private func load(_ attachment: Attachment) async {
        defer { loading.remove(attachment.id) }
        guard let metadata = try? await attachment.loadMetadata(of: ImageMetadataMessage.self),
              let data = try? await attachment.load(Data.self), listed.contains(attachment.id) else { return }
        loaded[attachment.id] = (CanvasImage(id: attachment.id, location: metadata.location, bytes: Array(data)), metadata.canvas)
        changed()
    }

    private func sendCatchUp(to newParticipants: Set<Participant>) async {
        guard let messenger else { return }
        for part in model.catchUp() {
            do {
                try await messenger.send(part, to: .only(newParticipants))
                catchUpsSent += 1
            } catch {
                FileHandle.standardError.write(Data("drawtogether: catch-up to \(newParticipants.map(\.id)) failed: \(error)\n".utf8))
            }
        }
    }

    // MARK: drawing

    /// Adds `point` at the end of stroke `id` (a new stroke when the id is new), here and for everyone.
    public func addPoint(_ point: Point, toStroke id: String) async throws(HuddleKitError) {
        let index = (model.canvases[model.current]?[id]?.points.keys.max() ?? -1) + 1
        let message = UpsertStrokeMessage(canvas: model.current, id: id, color: strokeColor, index: index, point: point)
        model.handle(message)
        changed()
        try await messenger?.send(message)
    }

    /// Draws a whole stroke through `points`; returns its id.
    @discardableResult
    public func draw(_ points: [Point]) async throws(HuddleKitError) -> String {
        let id = Self.newID()
        for point in points { try await addPoint(point, toStroke: id) }
        return id
    }

    /// Drops an image at `location`: an attachment with `ImageMetadataMessage` as its metadata.
    /// Throws `.badRequest` when the bytes are not an image of an accepted kind (`ImageFormat`).
    public func dropImage(_ data: Data, at location: Point, name: String = "image") async throws(HuddleKitError) {
        guard let journal else { throw .badRequest("the canvas has no session") }
        guard ImageFormat.sniff(Array(data)) != nil else { throw Self.notAnImage(name) }
        try await journal.add(data, metadata: ImageMetadataMessage(location: location, canvas: model.current), name: name)
    }

    /// Drops the image file at `url` at `location` (refused like `dropImage(_:at:name:)` when it is no image).
    public func dropImage(contentsOf url: URL, at location: Point) async throws(HuddleKitError) {
        guard let journal else { throw .badRequest("the canvas has no session") }
        let bytes: Data
        do { bytes = try Data(contentsOf: url, options: .mappedIfSafe) } catch { throw .ioError("cannot read \(url.path): \(error.localizedDescription)") }
        guard ImageFormat.sniff(Array(bytes)) != nil else { throw Self.notAnImage(url.lastPathComponent) }
        try await journal.add(contentsOf: url, metadata: ImageMetadataMessage(location: location, canvas: model.current))
    }

    /// A fresh canvas for everyone: a new activity value; the old canvas's images are removed.
    public func reset() async throws(HuddleKitError) {
        guard let groupSession, let journal else { throw .badRequest("the canvas has no session") }
        let old = model.current
        let activity = DrawTogether(canvas: Self.newID())
        try await groupSession.setActivity(activity)
        handle(activity)
        for attachment in journal.currentAttachments {
            let canvas = try? await attachment.loadMetadata(of: ImageMetadataMessage.self).canvas
            if canvas == old { try? await journal.remove(attachment: attachment) }
        }
    }

    /// Why a file is refused: one line the page shows.
    static func notAnImage(_ name: String) -> HuddleKitError {
        .badRequest("\(name) is not an image (\(ImageFormat.accepted))")
    }

    // MARK: pointers

    /// This participant's pointer moved to `point` (nil: it left the canvas). Sent to the others
    /// at most every 50 ms, the latest position only.
    public func moveCursor(_ point: Point?) {
        guard let due = throttle.moved(CursorMessage(point: point), now: .now) else { return }
        Task {
            try? await Task.sleep(until: due, clock: .continuous)
            await self.sendCursor()
        }
    }

    private func sendCursor() async {
        guard let fast, let message = throttle.take(now: .now) else { return }
        // Best effort, like the datagram it is: a pointer that is lost is replaced by the next.
        _ = try? await fast.send(message)
    }

    func tick(now: ContinuousClock.Instant) {
        if !cursorTable.isEmpty, cursorTable.prune(present: Set(activeParticipants.map(\.id)), now: now) { changed() }
        if throttle.needsRefresh(now: now), let latest = throttle.latest { moveCursor(latest.point) }
    }

    // MARK: what the canvas shows

    /// The images on the current canvas, by id.
    public var images: [CanvasImage] {
        loaded.values.filter { $0.canvas == model.current }.map(\.image).sorted { $0.id < $1.id }
    }

    /// Whether images are still being loaded.
    public var isLoadingImages: Bool { !loading.isEmpty }

    /// The participants now (empty before the session is joined).
    public var activeParticipants: Set<Participant> { groupSession?.activeParticipants ?? [] }

    /// What the canvas shows, as SVG.
    public func svg() -> String { SVGRenderer.render(model, images: images) }

    /// A value each time something shown changed (the latest one only, when the reader is slow).
    public func updates() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let key = nextWatcher
        nextWatcher += 1
        watchers[key] = continuation
        continuation.yield()
        return stream
    }

    private func changed() {
        for (key, continuation) in watchers {
            if case .terminated = continuation.yield() { watchers[key] = nil }
        }
    }

    // MARK: leaving

    /// Leaves the session: the node hands off the chunks only it holds, leaves and exits.
    public func leave() async throws(HuddleKitError) {
        try await groupSession?.leaveWithNode()
        stopTasks()
    }

    /// Stops following the session; the node stays in it.
    public func disconnect() async {
        await groupSession?.disconnect()
        stopTasks()
    }

    private func stopTasks() {
        for task in tasks { task.cancel() }
        tasks = []
        for continuation in watchers.values { continuation.finish() }
        watchers = [:]
    }

    static func newID() -> String { String(UInt64.random(in: 0...UInt64.max), radix: 16) }
}
