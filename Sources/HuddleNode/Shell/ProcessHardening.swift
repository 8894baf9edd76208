import CHuddleSystem
import Foundation

/// What a node does to its own process before it holds a key: no core dumps and no ptrace or
/// /proc/PID/mem access by other processes of the same user (`PR_SET_DUMPABLE` 0; the kernel then
/// makes /proc/PID/* root's), so neither a crash nor a neighbour can copy the keys out of memory.
enum ProcessHardening {
    static func apply() throws {
        guard huddle_set_not_dumpable() == 0 else {
            throw NodeError("cannot mark this process not dumpable (prctl PR_SET_DUMPABLE): \(String(cString: strerror(errno)))")
        }
    }
}
