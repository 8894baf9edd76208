import NIOCore

/// Cuts a TCP byte stream into frames of `length (u16, big-endian) | payload` and passes on every
/// complete frame of a read at once (so the link reader handles them as one batch). A frame's
/// payload is at most 65,535 bytes by construction, so nothing unbounded is buffered.
struct FrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = [ByteBuffer]

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        var frames: [ByteBuffer] = []
        while let length = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self),
              buffer.readableBytes >= 2 + Int(length),
              let frame = buffer.getSlice(at: buffer.readerIndex + 2, length: Int(length)) {
            buffer.moveReaderIndex(forwardBy: 2 + Int(length))
            frames.append(frame)
        }
        guard !frames.isEmpty else { return .needMoreData }
        context.fireChannelRead(wrapInboundOut(frames))
        return .needMoreData
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decode(context: context, buffer: &buffer)
    }
}

extension ByteBuffer {
    /// Appends one frame: its 16-bit length, then its bytes (callers keep frames ≤ 65,535 bytes).
    mutating func writeFrame(_ payload: [UInt8]) {
        payload.withUnsafeBytes { writeFrame($0) }
    }

    mutating func writeFrame(_ payload: UnsafeRawBufferPointer) {
        writeInteger(UInt16(truncatingIfNeeded: payload.count))
        writeBytes(payload)
    }
}
