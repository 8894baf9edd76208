import HuddleCore
import NIOCore

/// The node's handle on one authenticated link: who is at the other end, who dialed, and the
/// outbox `ChannelPump` writes. Sendable: every stored property is immutable or itself Sendable.
final class LinkHandle: Sendable {
    let peer: MemberInfo
    /// The member that opened the TCP connection (decides which of two duplicate links stays).
    let dialer: MemberID
    /// `waitingSince` as the link budget's stall rule counts it (`LinkBudget`, `SessionShell.closeStalledLinks`).
    let outbox: Outbox<LinkOutbound>
    let channel: Channel
    let remoteAddress: String
    /// The relay this link runs over (a circuit, `CircuitEnd`); nil for a direct link.
    let via: MemberID?
    /// Most bytes of link messages the writer takes from the outbox for one write (at least one
    /// message), so the encrypted buffer of a write is bounded however much is queued: taking
    /// everything, a sender of 16 KiB broadcasts had 34 MiB of write buffers at once across its
    /// 3 links (heaptrack). A megabyte per write still fills the socket buffer in a few writes.
    static let writeBatchBytes = 1 << 20

    /// `timed`: the outbox times its messages (`MessageHop.linkQueue`, with `--metrics`).
    init(peer: MemberInfo, dialer: MemberID, channel: Channel, via: MemberID? = nil, timed: Bool = false) {
        outbox = Outbox<LinkOutbound>(batchBytes: LinkHandle.writeBatchBytes, progressBelow: LinkBudget().backlogBytes, timed: timed)
        self.peer = peer
        self.via = via
        self.dialer = dialer
        self.channel = channel
        remoteAddress = via.map { "relayed by \($0)" } ?? channel.remoteAddress.map { "\($0)" } ?? "unknown"
    }

    /// Queues an encoded link message for the link's writer.
    func send(_ encoded: [UInt8]) { outbox.push(.message(encoded), bytes: encoded.count) }

    /// Queues a chunk: an encrypted header, then the (already encrypted) body as raw frames.
    func sendChunk(id: String, index: Int, body: [UInt8]) {
        let header = LinkMessage.chunkHeader(id: id, index: UInt32(index), length: UInt32(body.count)).encoded()
        outbox.push(.chunk(header: header, body: body), bytes: body.count + header.count, bulk: true)
    }

    /// Stops the writer after what is queued and closes the connection.
    func close() {
        outbox.close()
    }

    /// Closes the connection at once and drops what is queued (a peer that does not read).
    func abort() {
        outbox.discard()
        channel.close(promise: nil)
    }
}

/// What a link's writer writes: a link message (encrypted), or a chunk (encrypted header,
/// raw body).
enum LinkOutbound: Sendable {
    case message([UInt8])
    case chunk(header: [UInt8], body: [UInt8])
}
