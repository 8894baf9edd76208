import Foundation
import Synchronization

/// The ceiling: plain loopback TCP with no encryption, no ordering and batched writes, measured in
/// the same run as Huddle. Threads and blocking sockets keep it as simple as a C program.
enum RawFanout {
    /// Sends `count` length-prefixed messages of `size` bytes to each receiver; returns the lowest
    /// receiver rate in messages per second.
    static func run(receivers: Int, size: Int, count: Int) throws -> Double {
        let frame = [UInt8](repeating: 0x61, count: size + 4)
        let total = count * frame.count
        return try fanOut(receivers: receivers, bytesPerReceiver: total) { fd in
            var batch: [UInt8] = []
            batch.reserveCapacity(256 * 1024)
            var sent = 0
            while sent < count {
                batch.removeAll(keepingCapacity: true)
                while batch.count + frame.count <= 256 * 1024 && sent < count { batch += frame; sent += 1 }
                writeAll(fd, batch)
            }
        } perReceiverRate: { seconds in Double(count) / seconds }
    }

    /// Copies a file to each receiver over loopback TCP; returns seconds until all have it.
    static func copy(path: String, receivers: Int) throws -> Double {
        let size = ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? 0
        let start = Date()
        _ = try fanOut(receivers: receivers, bytesPerReceiver: size) { fd in
            guard let handle = FileHandle(forReadingAtPath: path) else { return }
            while let data = try? handle.read(upToCount: 1 << 20), !data.isEmpty { writeAll(fd, Array(data)) }
        } perReceiverRate: { $0 }
        return Date().timeIntervalSince(start)
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return }
            offset += n
        }
    }

    private static func fanOut(receivers: Int, bytesPerReceiver: Int, send: @escaping @Sendable (Int32) -> Void,
                               perReceiverRate: (Double) -> Double) throws -> Double {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        listen(listener, 16)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        defer { close(listener) }
        let group = DispatchGroup()
        let times = Times()
        for _ in 0..<receivers {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var target = address
            _ = withUnsafePointer(to: &target) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            let accepted = accept(listener, nil, nil)
            group.enter()
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 1 << 20)
                var received = 0
                let start = Date()
                while received < bytesPerReceiver {
                    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if n <= 0 { break }
                    received += n
                }
                times.add(Date().timeIntervalSince(start))
                close(fd)
                group.leave()
            }
            Thread.detachNewThread {
                send(accepted)
                close(accepted)
            }
        }
        group.wait()
        return times.values.map(perReceiverRate).min() ?? 0
    }
}

/// Receiver times, collected from several threads (a Mutex guards them, so it is Sendable as is).
final class Times: Sendable {
    private let stored = Mutex<[Double]>([])
    func add(_ t: Double) { stored.withLock { $0.append(t) } }
    var values: [Double] { stored.withLock { $0 } }
}
