import HuddleCore
import NIOCore

/// The node's handle on one authenticated link: who is at the other end, who dialed, and the
/// outbox its writer task drains. Sendable: every stored property is immutable or itself Sendable.
final class LinkHandle: Sendable {
    let peer: MemberInfo
    /// The member that opened the TCP connection (decides which of two duplicate links stays).
    let dialer: MemberID
    let outbox = Outbox<[UInt8]>()
    let channel: Channel
    let remoteAddress: String

    init(peer: MemberInfo, dialer: MemberID, channel: Channel) {
        self.peer = peer
        self.dialer = dialer
        self.channel = channel
        remoteAddress = channel.remoteAddress.map { "\($0)" } ?? "unknown"
    }

    /// Queues an encoded link message for the writer task.
    func send(_ encoded: [UInt8]) { outbox.push(encoded, bytes: encoded.count) }

    /// Stops the writer after what is queued and closes the connection.
    func close() {
        outbox.close()
    }
}
