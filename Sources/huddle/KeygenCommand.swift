import ArgumentParser
import Foundation
import HuddleCrypto

/// `huddle keygen`: a new session key file.
struct KeygenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Write a new session key file (mode 0600) and print its fingerprint.",
        discussion: "Give the same file to every node of the session; anyone holding it is a member. It is never overwritten."
    )

    @Option(name: .long, help: "Where to write the key (default: ./session.key). An existing file is not overwritten.")
    var out: String = "session.key"

    func run() async throws {
        let key = SessionKey.generate()
        do {
            try key.write(to: out)
        } catch {
            FileHandle.standardError.write(Data("huddle: \(error)\n".utf8))
            throw ExitCode(1)
        }
        print("wrote \(out) (session \(key.fingerprint))")
    }
}
