import ArgumentParser
import Foundation
import HuddleCrypto

/// `huddle keygen`: a new session key file, with the session's admins when given (issue 33).
struct KeygenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Write a new session key file (mode 0600) and print its fingerprint.",
        discussion: """
            Give the same file to every node of the session; anyone holding it is a member. It is never \
            overwritten. With --admin, only those nodes may remove members, rekey and change the admins \
            (huddle admins); the admins are part of the key (the fingerprint depends on them), so a node \
            given an edited list is not in the session. Without --admin every member may.
            """
    )

    @Option(name: .long, help: "Where to write the key (default: ./session.key). An existing file is not overwritten.")
    var out: String = "session.key"

    @Option(name: .long, help: "An admin: its node key (64 hex digits, `node` in huddle status) or its identity file (as huddle run --identity takes; made when absent). Repeatable, at most \(SessionKey.maxAdmins).")
    var admin: [String] = []

    func run() async throws {
        do {
            let admins = try admin.map(Self.nodeKey)
            let key = try SessionKey.generate(admins: admins)
            try key.write(to: out)
            print("wrote \(out) (session \(key.fingerprint)\(admins.isEmpty ? "" : ", \(key.admins.count) admin\(key.admins.count == 1 ? "" : "s")"))")
        } catch {
            FileHandle.standardError.write(Data("huddle: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }

    /// A node key given as 64 hex digits, or the public key of an identity file.
    static func nodeKey(_ text: String) throws -> [UInt8] {
        if text.utf8.count == 64, let key = bytesFromHex(text), key.count == 32 { return key }
        // Hex digits only, of another length: a mistyped node key, not a file to make an identity in.
        if !text.isEmpty, text.allSatisfy(\.isHexDigit) {
            throw ValidationError("--admin \(text): a node key is 64 hex digits (this has \(text.count)); or give an identity file's path")
        }
        return try Identity.loadOrCreate(path: text).publicKey
    }
}
