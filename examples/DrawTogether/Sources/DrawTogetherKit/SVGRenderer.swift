import Foundation

/// An image placed on the canvas: an attachment with metadata `{location: [x, y], canvas}`, its
/// centre at `location`.
public struct CanvasImage: Sendable, Equatable {
    public let id: String
    public let location: Point
    public let bytes: [UInt8]
    /// What kind of image its bytes are, or nil when they are none (such an image is not shown).
    public let format: ImageFormat?
    public init(id: String, location: Point, bytes: [UInt8]) {
        self.id = id; self.location = location; self.bytes = bytes
        format = ImageFormat.sniff(bytes)
    }
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
        // Only images of an accepted kind (`ImageFormat`): anything else a peer attached is not shown.
        for image in images.sorted(by: { $0.id < $1.id }) {
            guard let format = image.format else { continue }
            let (w, h) = format.fitted()
            let mime = format.mediaType
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

