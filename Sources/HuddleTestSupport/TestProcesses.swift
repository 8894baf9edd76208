import Foundation
import Synchronization

/// Starts, ends and pauses the processes a test runs, so that tests running side by side in one
/// test process cannot disturb each other.
///
/// - `launch` and `pipe`: one spawn at a time, and pipes no other child can hold, so every exit
///   is seen (Foundation's `Process` otherwise misses some; see `launch`).
/// - `end`: each process gets `signal` at once (teardown: SIGKILL, as nothing is checked any
///   more and a leave costs every other node work; SIGTERM where the test wants them to leave);
///   one still running `grace` seconds later gets SIGKILL; `cleanup` runs once all have exited;
///   any still running when the test process exits is killed then (`atexit`), so none outlives
///   the run. The wait runs on a thread of its own:
///   the pool has one thread per core (two here), and a teardown that waited there for nodes to
///   leave (seconds under load) stalled every other test, whose `Task.sleep`s woke seconds late,
///   so that a 0.7 s SIGSTOP became a pause long enough to be failed.
/// - `pause`: a SIGSTOP timed on a thread of its own, which says how long it really lasted.
public enum TestProcesses {
    /// Held around every spawn and pipe this test process makes (`launch`, `pipe`).
    private static let spawning = Mutex<Void>(())

    /// Starts `process` while no other spawn of this test process is under way.
    ///
    /// Foundation's `Process.run()` on Linux opens a socket pair without close-on-exec and learns
    /// that its child exited only when the child's end closes; it closes the other descriptors in
    /// the child by a list made before the spawn. A second `run()` on another thread in between
    /// hands that socket to its own child too, and then the first child's exit is not seen while
    /// the second lives: a test waited 30 s for a program that had exited, because a node started
    /// beside it held the socket. One spawn at a time leaves no such window.
    public static func launch(_ process: Process) throws {
        try spawning.withLock { _ in try process.run() }
    }

    /// A pipe whose two ends are close-on-exec, made while no spawn is under way, so no child but
    /// the one it is handed to (`standardOutput` and the like, which `launch` duplicates into the
    /// child) ever holds an end: a read to its end is never kept waiting by another test's child.
    public static func pipe() -> Pipe {
        spawning.withLock { _ in
            let pipe = Pipe()
            for handle in [pipe.fileHandleForReading, pipe.fileHandleForWriting] {
                _ = fcntl(handle.fileDescriptor, F_SETFD, FD_CLOEXEC)
            }
            return pipe
        }
    }

    /// `signal` to each running process now; the rest happens on a background thread.
    public static func end(_ processes: [Process], signal: Int32 = SIGKILL, grace: Double = 30,
                           cleanup: @escaping @Sendable () -> Void = {}) {
        let started = processes.filter(\.isRunning)
        for process in started { kill(process.processIdentifier, signal) }
        Pending.add(started.map(\.processIdentifier))
        Thread {
            // Each pid leaves `Pending` as soon as its process is seen to exit (its pid may be
            // reused afterwards); true while some process still runs.
            func running() -> Bool {
                let exited = started.filter { !$0.isRunning }.map(\.processIdentifier)
                Pending.remove(exited)
                return exited.count < started.count
            }
            let deadline = Date().addingTimeInterval(grace)
            while running() && Date() < deadline { usleep(20_000) }
            for process in started where process.isRunning { kill(process.processIdentifier, SIGKILL) }
            let killedBy = Date().addingTimeInterval(30)
            while running() && Date() < killedBy { usleep(5_000) }
            cleanup()
        }.start()
    }

    /// Stops `pid` (SIGSTOP) for `duration` seconds and resumes it (SIGCONT), timed on a thread of
    /// its own rather than a `Task.sleep` on the shared pool. Returns how long it was stopped.
    public static func pause(_ pid: pid_t, for duration: Double) async -> Double {
        await withCheckedContinuation { continuation in
            Thread {
                let start = ContinuousClock.now
                kill(pid, SIGSTOP)
                var asked = timespec(tv_sec: Int(duration), tv_nsec: Int((duration - duration.rounded(.down)) * 1e9))
                var rest = timespec()
                while nanosleep(&asked, &rest) != 0 && errno == EINTR { asked = rest }
                kill(pid, SIGCONT)
                continuation.resume(returning: (ContinuousClock.now - start) / .seconds(1))
            }.start()
        }
    }
}

/// Pids that got SIGTERM and have not been seen to exit: killed when the test process exits.
private enum Pending {
    static let pids = Mutex<Set<pid_t>>([])
    static let installed: Bool = {
        atexit { for pid in Pending.pids.withLock({ $0 }) { kill(pid, SIGKILL) } }
        return true
    }()

    static func add(_ new: [pid_t]) {
        _ = installed
        pids.withLock { $0.formUnion(new) }
    }

    static func remove(_ gone: [pid_t]) { pids.withLock { $0.subtract(gone) } }
}

extension Process {
    /// Waits for this process to exit, polling from the calling task (`waitUntilExit` would hold
    /// a thread of the shared pool), and returns its status. One still running after `seconds`,
    /// or when the task is cancelled, is killed first; -1 when its exit is still not seen 5 s
    /// after that.
    public func exitStatus(within seconds: Double = 60) async -> Int32 {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while isRunning && ContinuousClock.now < deadline && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
        if isRunning { kill(processIdentifier, SIGKILL) }
        let killedBy = ContinuousClock.now + .seconds(5)
        while isRunning && ContinuousClock.now < killedBy { try? await Task.sleep(for: .milliseconds(10)) }
        return isRunning ? -1 : terminationStatus
    }
}
