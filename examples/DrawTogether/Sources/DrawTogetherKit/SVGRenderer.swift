import Foundation

/// An image placed on the canvas: an attachment with metadata `{location: [x, y], canvas}`.
public struct CanvasImage: Sendable, Equatable {
    public let id: String
    public let location: Point
    public let bytes: [UInt8]
    public init(id: String, location: Point, bytes: [UInt8]) { self.id = id; self.location = location; self.bytes = bytes }
}

/// Writes what a canvas shows as SVG. Guarantees: the output depends only on the strokes, their
/// points and the images (sorted by id) — two participants with the same canvas write the same
/// bytes.
public enum SVGRenderer {
    public static let width = 1000
    public static let height = 700

    public static func render(_ model: CanvasModel, images: [CanvasImage]) -> String {
        let strokes = model.strokes
        var out = """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(height)" viewBox="0 0 \(width) \(height)">
        <!-- DrawTogether on Huddle: canvas "\(escape(model.current))", \(strokes.count) strokes, \(model.pointCount) points, \(images.count) images -->
        <rect width="100%" height="100%" fill="white"/>

        """
        for image in images.sorted(by: { $0.id < $1.id }) {
            let (mime, w, h) = describe(image.bytes)
            out += "<image id=\"img-\(escape(image.id))\" x=\"\(fmt(image.location.x - Double(w) / 2))\" y=\"\(fmt(image.location.y - Double(h) / 2))\" "
                + "width=\"\(w)\" height=\"\(h)\" href=\"data:\(mime);base64,\(Data(image.bytes).base64EncodedString())\"/>\n"
        }
        for stroke in strokes {
            let points = stroke.points.sorted { $0.key < $1.key }.map { "\(fmt($0.value.x)),\(fmt($0.value.y))" }.joined(separator: " ")
            out += "<polyline id=\"stroke-\(escape(stroke.id))\" fill=\"none\" stroke=\"\(escape(stroke.color))\" stroke-width=\"4\" "
                + "stroke-linecap=\"round\" stroke-linejoin=\"round\" points=\"\(points)\"/>\n"
        }
        out += "</svg>\n"
        return out
    }

    /// MIME type and size of an image: PNG sizes come from its header; others are shown 200×200.
    static func describe(_ bytes: [UInt8]) -> (String, Int, Int) {
        if bytes.count >= 24, bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]) {
            let w = bytes[16..<20].reduce(0) { $0 << 8 | Int($1) }
            let h = bytes[20..<24].reduce(0) { $0 << 8 | Int($1) }
            if (1...4096).contains(w), (1...4096).contains(h) { return ("image/png", w, h) }
            return ("image/png", 200, 200)
        }
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return ("image/jpeg", 200, 200) }
        if bytes.starts(with: Array("<svg".utf8)) || bytes.starts(with: Array("<?xml".utf8)) { return ("image/svg+xml", 200, 200) }
        return ("application/octet-stream", 200, 200)
    }

    static func fmt(_ v: Double) -> String {
        let r = (v * 10).rounded() / 10
        return r == r.rounded() ? String(Int64(r)) : String(format: "%.1f", r)
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }
}

extension CanvasImage {
    /// The image's media type, from its first bytes (PNG, JPEG, SVG; else `application/octet-stream`).
    public var mediaType: String { SVGRenderer.describe(bytes).0 }
    /// The size it is shown at on the canvas: a PNG's own size (up to 4096), else 200 × 200.
    public var displaySize: (width: Int, height: Int) {
        let (_, w, h) = SVGRenderer.describe(bytes)
        return (w, h)
    }
}
