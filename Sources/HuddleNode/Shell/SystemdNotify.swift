import Foundation

/// systemd's readiness protocol (`Type=notify`, sd_notify(3)): a datagram such as `READY=1` to the
/// Unix socket named by `NOTIFY_SOCKET` (a leading `@` names an abstract socket). Does nothing
/// when the variable is absent; a failure to send is ignored, as sd_notify's callers do.
enum SystemdNotify {
    static func send(_ state: String) {
        guard let path = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"], !path.isEmpty else { return }
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: bytes) }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let message = Array(state.utf8)
        _ = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddr in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, 0, sockaddr, length) }
            }
        }
    }
}
