import Foundation
import HuddleTestSupport
import Synchronization
import Testing

/// Foundation's `Process` sees a child's exit only once every copy of a socket it gives the child
/// is closed. Started through `TestProcesses.launch`, no other child gets a copy: a short program
/// started beside long-lived ones (as the suites start nodes in parallel) is seen to exit.
@Suite struct SpawnRaceTests {
    /// 600 short programs (`true`) and 600 long ones (`sleep 60`), started from four threads at
    /// once; every short one must be seen exited within 20 s, while the long ones still run.
    /// With `Process.run()` called directly instead, 1 of 600 was still "running" after 20 s in
    /// one of four runs on this 2-core machine under CPU load (six busy loops).
    @Test func aShortProgramsExitIsSeenWhileOthersAreStartedBesideIt() async throws {
        let (short, long) = await offThePool { () -> ([Process], [Process]) in
            let made = Mutex<(short: [Process], long: [Process])>(([], []))
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                let isShort = thread % 2 == 0
                for _ in 0..<300 {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: isShort ? "/bin/true" : "/bin/sleep")
                    process.arguments = isShort ? [] : ["60"]
                    process.standardOutput = FileHandle.nullDevice
                    process.standardError = FileHandle.nullDevice
                    guard (try? TestProcesses.launch(process)) != nil else { continue }
                    made.withLock { if isShort { $0.short.append(process) } else { $0.long.append(process) } }
                }
            }
            return made.withLock { ($0.short, $0.long) }
        }
        defer { TestProcesses.end(long, grace: 0) }
        #expect(short.count == 600 && long.count == 600, "started \(short.count) short and \(long.count) long programs")
        let deadline = ContinuousClock.now + .seconds(20)
        while short.contains(where: \.isRunning) && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let unseen = short.filter(\.isRunning).count
        #expect(unseen == 0, "\(unseen) of \(short.count) exited programs still look running: another child holds their exit socket")
    }
}
