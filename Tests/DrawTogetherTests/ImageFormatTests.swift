import DrawTogetherKit
import Foundation
import Testing

/// `ImageFormat`: the kind and size come from the bytes; anything else is no image.
struct ImageFormatTests {
    private func be(_ v: Int, _ n: Int) -> [UInt8] { (0..<n).reversed().map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    private func le(_ v: Int, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }

    private func png(_ w: Int, _ h: Int) -> [UInt8] {
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + be(13, 4) + Array("IHDR".utf8) + be(w, 4) + be(h, 4) + [8, 2, 0, 0, 0]
    }

    /// A JPEG whose size comes after an APP0 segment (as most files have).
    private func jpeg(_ w: Int, _ h: Int) -> [UInt8] {
        [0xFF, 0xD8, 0xFF, 0xE0] + be(16, 2) + Array("JFIF\0".utf8) + [1, 1, 0, 0, 1, 0, 1, 0, 0]
            + [0xFF, 0xC4] + be(4, 2) + [0, 0]  // a DHT: not a frame, skipped
            + [0xFF, 0xC0] + be(17, 2) + [8] + be(h, 2) + be(w, 2) + [3] + Array(repeating: 0, count: 9)
    }

    @Test func pngJpegGifAndWebPAreReadFromTheirHeaders() {
        #expect(ImageFormat.sniff(png(200, 100)) == ImageFormat(mediaType: "image/png", width: 200, height: 100))
        #expect(ImageFormat.sniff(jpeg(640, 480)) == ImageFormat(mediaType: "image/jpeg", width: 640, height: 480))
        let gif = Array("GIF89a".utf8) + le(320, 2) + le(240, 2) + [0, 0, 0]
        #expect(ImageFormat.sniff(gif) == ImageFormat(mediaType: "image/gif", width: 320, height: 240))
        let lossless = Array("RIFF".utf8) + le(100, 4) + Array("WEBPVP8L".utf8) + le(10, 4) + [0x2F] + le((99) | (49 << 14), 4)
        #expect(ImageFormat.sniff(lossless) == ImageFormat(mediaType: "image/webp", width: 100, height: 50))
        let extended = Array("RIFF".utf8) + le(100, 4) + Array("WEBPVP8X".utf8) + le(10, 4) + [0, 0, 0, 0] + le(799, 3) + le(599, 3)
        #expect(ImageFormat.sniff(extended) == ImageFormat(mediaType: "image/webp", width: 800, height: 600))
    }

    @Test func textSvgTruncatedAndZeroSizedDataAreNoImages() {
        for bytes: [UInt8] in [Array("hello, this is text".utf8), Array("<svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8),
                               Array(png(200, 100).prefix(20)), png(0, 100), Array(jpeg(640, 480).prefix(30)), [0xFF, 0xD8, 0xFF],
                               Array("GIF89a".utf8), []] {
            #expect(ImageFormat.sniff(bytes) == nil, "\(bytes.prefix(12))")
        }
    }

    @Test func noInputTrapsTheSniffer() {
        var rng = SystemRandomNumberGenerator()
        let heads: [[UInt8]] = [[0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], [0xFF, 0xD8, 0xFF], Array("GIF89a".utf8), Array("RIFF\0\0\0\0WEBPVP8".utf8)]
        for i in 0..<20_000 {
            let tail = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let bytes = heads[i % heads.count] + tail
            if let format = ImageFormat.sniff(bytes) { #expect(format.width >= 1 && format.height >= 1) }
        }
    }

    @Test func anImageIsFittedToItsLongestSideWithItsAspectRatioAndNeverEnlarged() {
        let wide = ImageFormat(mediaType: "image/png", width: 480, height: 240).fitted()
        #expect(wide.width == 300 && wide.height == 150)
        let tall = ImageFormat(mediaType: "image/jpeg", width: 1000, height: 3000).fitted()
        #expect(tall.width == 100 && tall.height == 300)
        let small = ImageFormat(mediaType: "image/png", width: 120, height: 80).fitted()
        #expect(small.width == 120 && small.height == 80)
        let sliver = ImageFormat(mediaType: "image/png", width: 60_000, height: 1).fitted()
        #expect(sliver.width == 300 && sliver.height == 1)
    }
}
