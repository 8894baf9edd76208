import Foundation

/// Runs a long simulation on a thread of its own and awaits its result. A simulation is minutes of
/// synchronous work; on Swift concurrency's cooperative pool (one thread per core: two here) it
/// would hold a thread the whole time, and the real-process tests running beside it would starve
/// past their deadlines.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: work()) }
        thread.stackSize = 16 << 20
        thread.start()
    }
}

/// Gives the calling thread file-system attributes of its own (`unshare(CLONE_FS)`: cwd, root and
/// umask), so a umask it sets reaches no other test running in this process. Call it on a thread
/// that ends afterwards (`offThePool`). False when the kernel refuses.
public func unshareFileSystemAttributes() -> Bool {
    // `unshare` is declared only under _GNU_SOURCE, so Glibc's module does not export it.
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "unshare") else { return false }
    let unshare = unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Int32).self)
    let cloneFS: Int32 = 0x0000_0200
    return unshare(cloneFS) == 0
}
