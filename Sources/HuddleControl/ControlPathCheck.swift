import Foundation

/// Checks what is at a control socket path before a node binds it or a client connects to it, so
/// that another local user cannot stand in for the node (DESIGN, Threat model: local users).
///
/// Refused (`ControlError.Code.untrustedPath`), each with one line naming the path and the owner:
/// a directory owned by another user (root's, such as /tmp, is fine), a directory others may write
/// into without the sticky bit (they could swap the socket), a path owned by another user, and a
/// path that is not a socket. Links are not followed for the path itself. A client may also trust
/// a socket of root's (`allowRoot`): root could read the node's keys anyway; a node never takes
/// over a path that is not its user's.
public enum ControlPathCheck {
    /// What a path holds once it passed the checks.
    public enum Found: Sendable, Equatable {
        case nothing
        /// A socket of this user's (a live node, or a stale file a killed node left).
        case socket
    }

    public static func check(_ path: String, uid: uid_t = geteuid(), allowRoot: Bool = false) throws(ControlError) -> Found {
        let directory = (path as NSString).deletingLastPathComponent
        var info = stat()
        if !directory.isEmpty, stat(directory, &info) == 0 {
            guard info.st_uid == uid || info.st_uid == 0 else {
                throw ControlError(.untrustedPath, "the control directory \(directory) is owned by uid \(info.st_uid), not by this user (uid \(uid)); refusing \(path)")
            }
            guard info.st_mode & 0o022 == 0 || info.st_mode & S_ISVTX != 0 else {
                throw ControlError(.untrustedPath, "the control directory \(directory) is writable by group or others and not sticky (mode \(String(info.st_mode & 0o7777, radix: 8))); refusing \(path)")
            }
        }
        guard lstat(path, &info) == 0 else { return .nothing }
        guard info.st_uid == uid || (allowRoot && info.st_uid == 0) else {
            throw ControlError(.untrustedPath, "\(path) is owned by uid \(info.st_uid), not by this user (uid \(uid)); refusing it (remove it or choose another --control path)")
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw ControlError(.untrustedPath, "\(path) exists and is not a socket; refusing to replace it (remove it or choose another --control path)")
        }
        return .socket
    }
}
