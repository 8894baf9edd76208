/// What kind of image some bytes are, and their size in pixels, read from the bytes themselves
/// (their magic numbers and headers), never from a name or a MIME type someone claimed.
///
/// Guarantees: `sniff` returns a format only for PNG, JPEG, GIF and WebP data whose header states a
/// size of 1…65,535 pixels each way; anything else (SVG, text, a truncated header) is no image. It
/// reads at most the bytes given, never traps on any input, and does not decode pixels.
public struct ImageFormat: Sendable, Equatable {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    public let mediaType: String
    /// The width in pixels its header states.
    public let width: Int
    /// The height in pixels its header states.
    public let height: Int

    /// A format as stated (`sniff` makes them from bytes).
    public init(mediaType: String, width: Int, height: Int) {
        self.mediaType = mediaType; self.width = width; self.height = height
    }

    /// The longest side an image is shown at on the canvas (in canvas units).
    public static let longestSide = 300
    /// What the page and the messages call an acceptable image.
    public static let accepted = "PNG, JPEG, GIF or WebP"

    /// The format of `bytes`, or nil when they are not an image of an accepted kind.
    public static func sniff(_ bytes: [UInt8]) -> ImageFormat? {
        let format: ImageFormat?
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            // The first chunk is IHDR: width and height, 4 bytes each, big-endian.
            format = bytes.count >= 24 && bytes[12..<16].elementsEqual("IHDR".utf8)
                ? ImageFormat(mediaType: "image/png", width: bigEndian(bytes, 16, 4), height: bigEndian(bytes, 20, 4)) : nil
        } else if bytes.starts(with: [0xFF, 0xD8, 0xFF]) {
            format = jpeg(bytes)
        } else if bytes.starts(with: Array("GIF87a".utf8)) || bytes.starts(with: Array("GIF89a".utf8)) {
            format = bytes.count >= 10 ? ImageFormat(mediaType: "image/gif", width: littleEndian(bytes, 6, 2), height: littleEndian(bytes, 8, 2)) : nil
        } else if bytes.count >= 16, bytes.starts(with: Array("RIFF".utf8)), bytes[8..<12].elementsEqual("WEBP".utf8) {
            format = webp(bytes)
        } else {
            format = nil
        }
        guard let format, (1...65_535).contains(format.width), (1...65_535).contains(format.height) else { return nil }
        return format
    }

    /// The size it is shown at: the same aspect ratio, the longest side at most `longest`, never
    /// enlarged; each side at least 1.
    public func fitted(longest: Int = ImageFormat.longestSide) -> (width: Int, height: Int) {
        let scale = min(1, Double(longest) / Double(max(width, height)))
        return (max(1, Int((Double(width) * scale).rounded())), max(1, Int((Double(height) * scale).rounded())))
    }

    /// JPEG: the size is in the first start-of-frame segment (SOF0…SOF15 but DHT, JPG and DAC).
    private static func jpeg(_ b: [UInt8]) -> ImageFormat? {
        var i = 2
        while i + 9 <= b.count {
            guard b[i] == 0xFF else { return nil }
            let marker = b[i + 1]
            if marker == 0xFF { i += 1; continue }  // fill byte
            if marker == 0x01 || (0xD0...0xD9).contains(marker) { i += 2; continue }  // no length
            let length = bigEndian(b, i + 2, 2)
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                return ImageFormat(mediaType: "image/jpeg", width: bigEndian(b, i + 7, 2), height: bigEndian(b, i + 5, 2))
            }
            guard length >= 2 else { return nil }
            i += 2 + length
        }
        return nil
    }

    /// WebP: lossy (`VP8 `), lossless (`VP8L`) or extended (`VP8X`) — each states its size differently.
    private static func webp(_ b: [UInt8]) -> ImageFormat? {
        let chunk = String(decoding: b[12..<16], as: UTF8.self)
        switch chunk {
        case "VP8 " where b.count >= 30:
            return ImageFormat(mediaType: "image/webp", width: littleEndian(b, 26, 2) & 0x3FFF, height: littleEndian(b, 28, 2) & 0x3FFF)
        case "VP8L" where b.count >= 25 && b[20] == 0x2F:
            let bits = littleEndian(b, 21, 4)
            return ImageFormat(mediaType: "image/webp", width: 1 + bits & 0x3FFF, height: 1 + (bits >> 14) & 0x3FFF)
        case "VP8X" where b.count >= 30:
            return ImageFormat(mediaType: "image/webp", width: 1 + littleEndian(b, 24, 3), height: 1 + littleEndian(b, 27, 3))
        default:
            return nil
        }
    }

    /// `count` (≤ 4) bytes at `at`, big-endian; the caller checked they are there.
    private static func bigEndian(_ b: [UInt8], _ at: Int, _ count: Int) -> Int {
        b[at..<at + count].reduce(0) { $0 << 8 | Int($1) }
    }

    /// `count` (≤ 4) bytes at `at`, little-endian; the caller checked they are there.
    private static func littleEndian(_ b: [UInt8], _ at: Int, _ count: Int) -> Int {
        b[at..<at + count].reversed().reduce(0) { $0 << 8 | Int($1) }
    }
}
