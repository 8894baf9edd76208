/// One step of a participant script (`drawtogether script FILE`), one per line:
///
///     color #e6194b              # this participant's color (default: a random one)
///     stroke 10,10 20,15 30,30   # draw a stroke through these points (one message per point)
///     image PATH X,Y             # drop an image (an attachment with metadata {location, canvas})
///     reset                      # a fresh canvas for everyone
///     wait members N             # until the session has N alive members
///     wait points N              # until the current canvas shows at least N points
///     wait images N              # until N images of the current canvas are fetched here
///     sleep MS
///     render OUT.svg             # write what this participant's canvas shows
///     leave                      # leave the session (the node hands off its chunks and exits)
///     stay                       # keep answering late joiners until SIGINT/SIGTERM
///
/// Blank lines are ignored, and so is the rest of a line from a word starting with `#` (colors aside).
public enum ScriptStep: Sendable, Equatable {
    case color(String)
    case stroke([Point])
    case image(path: String, at: Point)
    case reset
    case waitMembers(Int)
    case waitPoints(Int)
    case waitImages(Int)
    case sleep(milliseconds: Int)
    case render(path: String)
    case leave
    case stay

    /// A script error: the line number (from 1) and what is wrong.
    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public let line: Int
        public let message: String
        public var description: String { "line \(line): \(message)" }
    }

    public static func parse(_ text: String) throws(ParseError) -> [ScriptStep] {
        var steps: [ScriptStep] = []
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            // A word starting with `#` begins a comment, unless it is a color (#rrggbb).
            let all = raw.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" }).map(String.init)
            let words = Array(all.prefix { !$0.hasPrefix("#") || isColor($0) })
            guard let verb = words.first else { continue }
            let args = Array(words.dropFirst())
            func fail(_ why: String) -> ParseError { ParseError(line: n + 1, message: why) }
            func count() throws(ParseError) -> Int {
                guard args.count == 2, let v = Int(args[1]), v >= 0 else { throw fail("expected `wait \(args.first ?? "members|points|images") N`") }
                return v
            }
            switch verb {
            case "color":
                guard args.count == 1, isColor(args[0]) else { throw fail("expected `color #rrggbb`") }
                steps.append(.color(args[0].lowercased()))
            case "stroke":
                var points: [Point] = []
                for a in args {
                    guard let p = point(a) else { throw fail("`\(a)` is not a point X,Y") }
                    points.append(p)
                }
                guard !points.isEmpty else { throw fail("a stroke needs at least one point") }
                steps.append(.stroke(points))
            case "image":
                guard args.count == 2, let p = point(args[1]) else { throw fail("expected `image PATH X,Y`") }
                steps.append(.image(path: args[0], at: p))
            case "reset": steps.append(.reset)
            case "wait":
                switch args.first {
                case "members": steps.append(.waitMembers(try count()))
                case "points": steps.append(.waitPoints(try count()))
                case "images": steps.append(.waitImages(try count()))
                default: throw fail("expected `wait members|points|images N`")
                }
            case "sleep":
                guard args.count == 1, let ms = Int(args[0]), ms >= 0 else { throw fail("expected `sleep MILLISECONDS`") }
                steps.append(.sleep(milliseconds: ms))
            case "render":
                guard args.count == 1 else { throw fail("expected `render OUT.svg`") }
                steps.append(.render(path: args[0]))
            case "leave": steps.append(.leave)
            case "stay": steps.append(.stay)
            default: throw fail("unknown step `\(verb)`")
            }
        }
        return steps
    }

    static func point(_ s: String) -> Point? {
        let parts = s.split(separator: ",")
        guard parts.count == 2, let x = Double(parts[0]), let y = Double(parts[1]), x.isFinite, y.isFinite else { return nil }
        return Point(x: x, y: y)
    }

    public static func isColor(_ s: String) -> Bool {
        s.count == 7 && s.first == "#" && s.dropFirst().allSatisfy(\.isHexDigit)
    }
}
