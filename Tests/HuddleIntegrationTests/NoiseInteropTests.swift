import Foundation
import HuddleTestSupport
import HuddleCore
import HuddleCrypto
import Testing

/// The link handshake against an independent Noise implementation: the `noiseprotocol` package
/// from PyPI (Tests/interop/noise_xxpsk0.py) runs `Noise_XXpsk0_25519_ChaChaPoly_BLAKE2b` as the
/// initiator against a real node, and as the responder a real node dials. The cacophony vectors have no XXpsk0 vector, so without this
/// our link handshake would only be tested against itself.
///
/// The Python comes from `$HUDDLE_NOISE_PYTHON` (`make test` creates `.build/noise-venv` with
/// scripts/noise-venv.sh and sets it), else `.build/noise-venv/bin/python` when it exists.
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
private let interopScript = repositoryRoot.appendingPathComponent("Tests/interop/noise_xxpsk0.py").path

/// The Python to run the script with, or why there is none.
private func noisePython() -> Result<String, NoisePythonMissing> {
    if let path = ProcessInfo.processInfo.environment["HUDDLE_NOISE_PYTHON"], !path.isEmpty {
        guard FileManager.default.isExecutableFile(atPath: path) else {
            return .failure(NoisePythonMissing(description: "HUDDLE_NOISE_PYTHON is \(path), which is not an executable"))
        }
        return .success(path)
    }
    let fallback = repositoryRoot.appendingPathComponent(".build/noise-venv/bin/python").path
    if FileManager.default.isExecutableFile(atPath: fallback) { return .success(fallback) }
    return .failure(NoisePythonMissing(description: "HUDDLE_NOISE_PYTHON is not set and \(fallback) does not exist"))
}

private struct NoisePythonMissing: Error, CustomStringConvertible { let description: String }

/// Records that the interop test could not run, and how to make it run (never a silent pass).
private func recordMissing(_ missing: NoisePythonMissing) {
    Issue.record("""
        NOISE INTEROP PYTHON MISSING: \(missing.description). Run `make test` (scripts/noise-venv.sh creates \
        .build/noise-venv with the noiseprotocol package), or set HUDDLE_NOISE_PYTHON to a python3 that has \
        `pip install noiseprotocol`.
        """)
}

/// One run of the Python script (initiator, or responder with `--listen`): its JSON lines, once
/// printed; `finish()` closes its standard input (ending a `--hold`) and waits for it to exit.
private final class NoiseInitiator: @unchecked Sendable {
    // @unchecked: everything is set in init; Process and FileHandle are thread-safe for these calls.
    let process = Process()
    private let stdin = TestProcesses.pipe()
    private let stdoutPath: String
    private let stderrPath: String

    init(python: String, dir: String, label: String, arguments: [String]) throws {
        stdoutPath = "\(dir)/noise-\(label).out"
        stderrPath = "\(dir)/noise-\(label).err"
        for path in [stdoutPath, stderrPath] { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [interopScript] + arguments
        process.standardInput = stdin
        process.standardOutput = FileHandle(forWritingAtPath: stdoutPath)
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        try TestProcesses.launch(process)
    }

    private var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// The script's JSON line (the `index`th: a responder prints where it listens first); fails
    /// when it exits without one.
    func result(line index: Int = 0, within seconds: Double = 60) async throws -> [String: Any] {
        func lines() -> [Substring] { stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast() }
        try await eventually("the noiseprotocol script's result", within: seconds) { lines().count > index || !process.isRunning }
        guard lines().count > index else {
            throw TestTimeout(description: "the noiseprotocol script exited with \(process.terminationStatus) and no result: \(stderr)")
        }
        let line = String(lines()[index])
        guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw TestTimeout(description: "the noiseprotocol initiator printed \(line), not a JSON object")
        }
        return object
    }

    func finish() async throws -> Int32 {
        try? stdin.fileHandleForWriting.close()
        try await eventually("the noiseprotocol initiator to exit", within: 30) { !process.isRunning }
        return process.terminationStatus
    }

    func kill() { if process.isRunning { process.terminate() } }
}

private func bytes(_ object: [String: Any], _ key: String) -> [UInt8]? {
    (object[key] as? String).flatMap(bytesFromHex)
}

/// "huddle-link-binding v1": what a link peer's identity signs, with its Noise static key after it.
private let bindingContext = Array("huddle-link-binding v1".utf8)

/// Checks what noiseprotocol decrypted from the node `node` (identity key `nodeKey`) in a link
/// handshake, whichever side the node took: the payload of `message` (2: the node responded; 3:
/// it initiated) — identity | signature over the binding context and the Noise static key
/// noiseprotocol learned | the node's member record — and, in transport, the node's hello and its
/// push-pull reply naming itself. False when noiseprotocol reported no payload or an error (the
/// issue is recorded; the caller stops there).
private func expectNodeSide(of result: [String: Any], message: Int, node a: TestNode, nodeKey: [UInt8], logs: String) throws -> Bool {
    guard let payload = bytes(result, "payload"), payload.count >= 96, let remoteStatic = bytes(result, "remote_static"), remoteStatic.count == 32 else {
        Issue.record("no message \(message) payload and static key: \(result)")
        return false
    }
    let remoteNodeKey = Array(payload[0..<32])
    let signature = Array(payload[32..<96])
    #expect(remoteNodeKey == nodeKey, "message \(message) names identity \(hexString(remoteNodeKey)), a's status \(hexString(nodeKey))")
    #expect(Identity.verify(signature: signature, message: bindingContext + remoteStatic, publicKey: remoteNodeKey),
            "a's signature in message \(message) does not cover the Noise static key noiseprotocol received")
    // The check can fail: the same signature does not cover another static key, nor verify under another identity.
    #expect(!Identity.verify(signature: signature, message: bindingContext + NoiseKeyPair.generate().publicKey, publicKey: remoteNodeKey))
    #expect(!Identity.verify(signature: signature, message: bindingContext + remoteStatic, publicKey: Identity.generate().publicKey))
    let record = try MemberInfo.decode(Array(payload[96...]))
    #expect(record.id.description == a.member && record.node == nodeKey && record.name == "a" && record.addr == a.addr, "\(record)")
    if let error = result["error"] {
        Issue.record("noiseprotocol failed after message \(message): \(error)\n\(logs)")
        return false
    }
    // Transport: what noiseprotocol decrypted, reassembled and decoded as link messages.
    var reassembler = LinkReassembler(limit: 1 << 20)
    var messages: [LinkMessage] = []
    for hex in result["records"] as? [String] ?? [] {
        guard let record = bytesFromHex(hex) else { Issue.record("bad record hex \(hex)"); continue }
        if let message = try reassembler.add(record) { messages.append(try LinkMessage.decode(message)) }
    }
    #expect(messages.contains { if case .hello = $0 { true } else { false } }, "no hello from a: \(messages)")
    let reply = messages.compactMap { if case let .pushPullReply(state) = $0 { state } else { nil } }.first
    #expect(reply?.members.contains { $0.id.description == a.member && $0.node == nodeKey } == true, "a's push-pull reply: \(String(describing: reply))")
    return true
}

@Suite(.timeLimit(.minutes(10)))
struct NoiseInteropTests {
    /// noiseprotocol decrypts the node's message 2 and we verify its identity binding from the
    /// outside; then it finishes the handshake with message 3 (a binding of its own), and the two
    /// transport ciphers interoperate: the node answers a push-pull sent through noiseprotocol's
    /// cipher, and noiseprotocol decrypts the node's hello and reply.
    @Test func anIndependentNoiseInitiatorCompletesTheLinkHandshakeWithANode() async throws {
        let python: String
        switch noisePython() {
        case let .success(path): python = path
        case let .failure(missing): recordMissing(missing); return
        }
        let cluster = try TestCluster("noise")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let status = try await a.request("status")
        guard let nodeKey = status["node"]?.stringValue.flatMap(bytesFromHex), nodeKey.count == 32 else {
            Issue.record("a's status has no node key: \(status.serializedForLog)"); return
        }
        let psk = try SessionKey.load(from: cluster.key).subkey(.handshakePSK)

        // Our side of message 3: a fresh identity bound to a fresh Noise static key, and a member record.
        let identity = Identity.generate()
        let noiseStatic = NoiseKeyPair.generate()
        let info = MemberInfo(id: MemberID(raw: UInt64.random(in: 1...UInt64.max)), node: identity.publicKey, name: "noiseprotocol", addr: "127.0.0.1:9")
        let payload3 = identity.publicKey + identity.sign(bindingContext + noiseStatic.publicKey) + info.encoded()
        let pushPull = LinkRecords.split(LinkMessage.pushPull(SWIMPushPull(join: false, members: [])).encoded())
        // A reply's record starts with flag 0 (last record), then the message's version and kind.
        let replyPrefix = [0] + LinkMessage.pushPullReply(SWIMPushPull(join: false, members: [])).encoded().prefix(2)

        let initiator = try NoiseInitiator(python: python, dir: cluster.dir, label: "good", arguments: [
            "--addr", a.addr, "--psk", hexString(psk), "--static", hexString(noiseStatic.privateKey),
            "--payload3", hexString(payload3), "--until", hexString(replyPrefix), "--hold",
        ] + pushPull.flatMap { ["--send", hexString($0)] })
        defer { initiator.kill() }
        let result = try await initiator.result()
        #expect(result["outcome"] as? String == "message2", "\(result); \(initiator.stderr)\n\(cluster.logs)")

        guard try expectNodeSide(of: result, message: 2, node: a, nodeKey: nodeKey, logs: cluster.logs) else { return }

        // While noiseprotocol holds the link, a counts it; once it closes, the link is gone.
        try await eventually("a to count the noiseprotocol link") { try await a.request("stats")["links"]?.intValue == 1 }
        #expect(try await initiator.finish() == 0, "\(initiator.stderr)")
        try await eventually("a to drop the closed link") { try await a.request("stats")["links"]?.intValue == 0 }
        #expect(!a.log.contains("refused link"), "a refused a link: \(a.log)")
    }

    /// The other way round: a node dials noiseprotocol (its `--join` seed), so noiseprotocol is the
    /// responder. It listens on a port of its own (bound by the script itself, named on its first
    /// line), answers the node's message 1 with a message 2 binding a fresh identity to its Noise
    /// static key, decrypts the node's message 3 — whose identity binding we verify from the outside
    /// — and sends a push-pull with its member record through its transport cipher: the node holds
    /// the link, takes the record (it lists the member), and noiseprotocol decrypts the node's
    /// hello and push-pull reply.
    @Test func anIndependentNoiseResponderCompletesTheLinkHandshakeWithANodeThatDialsIt() async throws {
        let python: String
        switch noisePython() {
        case let .success(path): python = path
        case let .failure(missing): recordMissing(missing); return
        }
        let cluster = try TestCluster("noiseresp")
        defer { cluster.shutdown() }
        // The responder waits 60 s for the node's dial: the node's slot is taken before it starts.
        await cluster.reserveSlot()
        let psk = try SessionKey.load(from: cluster.key).subkey(.handshakePSK)
        let identity = Identity.generate()
        let noiseStatic = NoiseKeyPair.generate()
        let info = MemberInfo(id: MemberID(raw: UInt64.random(in: 1...(1 << 52))), node: identity.publicKey, name: "noiseprotocol", addr: "127.0.0.1:9")
            .signed(by: identity)
        let payload2 = identity.publicKey + identity.sign(bindingContext + noiseStatic.publicKey) + info.encoded()
        let pushPull = LinkRecords.split(LinkMessage.pushPull(SWIMPushPull(join: false, members: [info])).encoded())
        let replyPrefix = [0] + LinkMessage.pushPullReply(SWIMPushPull(join: false, members: [])).encoded().prefix(2)

        let responder = try NoiseInitiator(python: python, dir: cluster.dir, label: "responder", arguments: [
            "--listen", "127.0.0.1:0", "--psk", hexString(psk), "--static", hexString(noiseStatic.privateKey),
            "--payload2", hexString(payload2), "--until", hexString(replyPrefix), "--timeout", "60", "--hold",
        ] + pushPull.flatMap { ["--send", hexString($0)] })
        defer { responder.kill() }
        let listening = try await responder.result(line: 0)
        guard let port = listening["listening"] as? Int else { Issue.record("the responder named no port: \(listening); \(responder.stderr)"); return }
        let a = try await cluster.start("a", join: ["127.0.0.1:\(port)"])
        let status = try await a.request("status")
        guard let nodeKey = status["node"]?.stringValue.flatMap(bytesFromHex), nodeKey.count == 32 else {
            Issue.record("a's status has no node key: \(status.serializedForLog)"); return
        }
        let result = try await responder.result(line: 1, within: 90)
        #expect(result["outcome"] as? String == "message3", "\(result); \(responder.stderr)\n\(cluster.logs)")

        guard try expectNodeSide(of: result, message: 3, node: a, nodeKey: nodeKey, logs: cluster.logs) else { return }
        try await eventually("a to take noiseprotocol's member record") {
            try await a.request("members")["members"]?.arrayValue?.contains { $0.objectValue?["member"]?.stringValue == info.id.description } ?? false
        }
        try await eventually("a to count the link it dialed to noiseprotocol") { try await a.request("stats")["links"]?.intValue == 1 }
        #expect(try await responder.finish() == 0, "\(responder.stderr)")
        try await eventually("a to drop the closed link") { try await a.request("stats")["links"]?.intValue == 0 }
        #expect(!a.log.contains("refused link"), "a refused a link: \(a.log)")
    }

    /// A message 1 made with another session key's PSK gets no message 2 (psk0 keys even the first
    /// message): the node closes the connection (EOF, or a reset) or stays silent (a 3 s bound); a
    /// message 1 with the right key, sent afterwards the same way, is answered.
    @Test func aMessage1MadeWithAnotherSessionKeyGetsNoAnswer() async throws {
        let python: String
        switch noisePython() {
        case let .success(path): python = path
        case let .failure(missing): recordMissing(missing); return
        }
        let cluster = try TestCluster("noisepsk")
        defer { cluster.shutdown() }
        let a = try await cluster.start("a")
        let otherPSK = SessionKey.generate().subkey(.handshakePSK)

        let stranger = try NoiseInitiator(python: python, dir: cluster.dir, label: "stranger",
                                          arguments: ["--addr", a.addr, "--psk", hexString(otherPSK), "--timeout", "3"])
        defer { stranger.kill() }
        let refused = try await stranger.result()
        #expect(try await stranger.finish() == 0, "\(stranger.stderr)")
        let outcome = refused["outcome"] as? String
        #expect(["eof", "reset", "timeout"].contains(outcome), "a message 1 with another session key got: \(refused)")
        try await eventually("a to log the refused link") { a.log.contains("refused link") }
        #expect(try await a.request("stats")["links"]?.intValue == 0)

        // Control: the same script with a's session key gets message 2, from the same node.
        let psk = try SessionKey.load(from: cluster.key).subkey(.handshakePSK)
        let member = try NoiseInitiator(python: python, dir: cluster.dir, label: "member",
                                        arguments: ["--addr", a.addr, "--psk", hexString(psk)])
        defer { member.kill() }
        let answered = try await member.result()
        #expect(try await member.finish() == 0, "\(member.stderr)")
        #expect(answered["outcome"] as? String == "message2", "a message 1 with a's session key got: \(answered)")
    }
}
