/// Runs work the node starts later (dials, join retries) as children of the node's task tree, so
/// every such task ends when the node stops instead of outliving it.
final class TaskSpawner: Sendable {
    typealias Job = @Sendable () async -> Void
    private let stream: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation

    init() { (stream, continuation) = AsyncStream.makeStream(of: Job.self) }

    /// Starts `job`; false (and `job` never runs) once the spawner has finished: whoever waits for
    /// the job must then not wait.
    @discardableResult
    func spawn(_ job: @escaping Job) -> Bool {
        if case .terminated = continuation.yield(job) { return false }
        return true
    }

    /// Runs jobs until `finish()` (or cancellation), then waits for the running ones.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await job in stream {
                group.addTask { await job() }
            }
        }
    }

    func finish() { continuation.finish() }
}
