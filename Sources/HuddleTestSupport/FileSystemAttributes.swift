import Foundation

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
