import Foundation

/// The executables under test: those of the build that made this test bundle (`huddle`,
/// `huddle-sim`, `drawtogether` sit beside it in `.build/<triple>/<debug|release>`), or the
/// directory of `$HUDDLE_BIN` when it is set. So `swift test` and `swift test -c release` each
/// run the node of their own configuration, and nothing silently runs a stale build of the other.
public enum BuiltExecutables {
    /// The directory holding the executables.
    public static let directory: String = {
        if let huddle = ProcessInfo.processInfo.environment["HUDDLE_BIN"], !huddle.isEmpty {
            return URL(fileURLWithPath: huddle).standardizedFileURL.deletingLastPathComponent().path
        }
        // /proc/self/exe is the test bundle (`HuddlePackageTests.xctest`) itself.
        let bundle = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: bundle).standardizedFileURL.deletingLastPathComponent().path
    }()

    /// The path of executable `name` (`huddle`: `$HUDDLE_BIN` itself when set).
    public static func path(_ name: String) -> String {
        if name == "huddle", let huddle = ProcessInfo.processInfo.environment["HUDDLE_BIN"], !huddle.isEmpty {
            return URL(fileURLWithPath: huddle).standardizedFileURL.path
        }
        return "\(directory)/\(name)"
    }
}
