import Foundation

/// Where the control socket is: the explicit path, else `$HUDDLE_CONTROL`, else
/// `$XDG_RUNTIME_DIR/huddle.sock`, else `/tmp/huddle-$UID.sock` (CONTROL.md, for node and CLI alike).
public enum ControlPath {
    public static func resolve(_ explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let path = environment["HUDDLE_CONTROL"], !path.isEmpty { return path }
        if let dir = environment["XDG_RUNTIME_DIR"], !dir.isEmpty { return "\(dir)/huddle.sock" }
        return "/tmp/huddle-\(getuid()).sock"
    }
}
